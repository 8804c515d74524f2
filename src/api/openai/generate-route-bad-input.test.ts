// Bad input keeps the server serving: each case gets its 4xx in OpenAI's error shape, the back
// end is never called for it, and a good request sent right after succeeds.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultSet } from '../../core/index.js';
import { send, startTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ contextLength: 16, maxBodyBytes: 4096 });
});
afterAll(() => t.close());

interface Case {
  readonly name: string;
  readonly path?: string;
  readonly body: unknown;
  readonly status: number;
  readonly code: string;
  readonly param?: string | null;
}

const C = '/v1/completions';
const CHAT = '/v1/chat/completions';
const hi = { prompt: 'Hi', max_tokens: 1 };
const chat = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 };

const CASES: readonly Case[] = [
  { name: 'malformed JSON', body: '{"prompt": "Hi",', status: 400, code: 'invalid_request' },
  {
    name: 'invalid UTF-8',
    body: Uint8Array.from([...Buffer.from('{"prompt": "'), 0xc3, 0x28, ...Buffer.from('"}')]),
    status: 400,
    code: 'invalid_request',
  },
  { name: 'an empty body', body: '', status: 400, code: 'invalid_request' },
  { name: 'a body that is not an object', body: '[1, 2]', status: 400, code: 'invalid_request' },
  { name: 'a missing prompt', body: { max_tokens: 1 }, status: 400, code: 'invalid_request', param: 'prompt' },
  { name: 'a prompt of the wrong type', body: { prompt: 5 }, status: 400, code: 'invalid_request', param: 'prompt' },
  { name: 'an empty prompt', body: { prompt: '' }, status: 400, code: 'invalid_request', param: 'prompt' },
  { name: 'an empty token prompt', body: { prompt: [] }, status: 400, code: 'invalid_request', param: 'prompt' },
  {
    name: 'an empty nested token prompt',
    body: { prompt: [[]] },
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  {
    name: '129 prompts',
    body: { prompt: Array.from({ length: 129 }, () => 'a') },
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  {
    name: 'prompts x n over 128 choices',
    body: { prompt: ['a', 'b', 'c'], n: 43 },
    status: 400,
    code: 'invalid_request',
    param: 'n',
  },
  {
    name: 'a prompt list with a number in it',
    body: { prompt: ['a', 5] },
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  {
    name: 'a prompt list with an empty prompt',
    body: { prompt: ['a', ''] },
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  {
    name: 'a token id out of vocabulary',
    body: { prompt: [1, 0x110002] },
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  { name: 'a negative token id', body: { prompt: [1, -2] }, status: 400, code: 'invalid_request', param: 'prompt' },
  {
    name: 'max_tokens as a string',
    body: { ...hi, max_tokens: '10' },
    status: 400,
    code: 'invalid_request',
    param: 'max_tokens',
  },
  { name: 'max_tokens 0', body: { ...hi, max_tokens: 0 }, status: 400, code: 'invalid_request', param: 'max_tokens' },
  {
    name: 'negative max_tokens',
    body: { ...hi, max_tokens: -1 },
    status: 400,
    code: 'invalid_request',
    param: 'max_tokens',
  },
  {
    name: 'fractional max_tokens',
    body: { ...hi, max_tokens: 1.5 },
    status: 400,
    code: 'invalid_request',
    param: 'max_tokens',
  },
  {
    name: 'max_tokens past 2^53',
    body: { ...hi, max_tokens: 1e300 },
    status: 400,
    code: 'invalid_request',
    param: 'max_tokens',
  },
  {
    name: 'huge max_tokens',
    body: { ...hi, max_tokens: 1_000_000_000 },
    status: 400,
    code: 'context_length_exceeded',
    param: 'max_tokens',
  },
  {
    name: 'temperature as a string',
    body: { ...hi, temperature: 'hot' },
    status: 400,
    code: 'invalid_request',
    param: 'temperature',
  },
  {
    name: 'temperature out of range',
    body: { ...hi, temperature: 3 },
    status: 400,
    code: 'invalid_request',
    param: 'temperature',
  },
  { name: 'top_p 0', body: { ...hi, top_p: 0 }, status: 400, code: 'invalid_request', param: 'top_p' },
  { name: 'top_k -2', body: { ...hi, top_k: -2 }, status: 400, code: 'invalid_request', param: 'top_k' },
  { name: 'a fractional seed', body: { ...hi, seed: 1.5 }, status: 400, code: 'invalid_request', param: 'seed' },
  { name: 'stream as a string', body: { ...hi, stream: 'yes' }, status: 400, code: 'invalid_request', param: 'stream' },
  { name: 'stop as a number', body: { ...hi, stop: 5 }, status: 400, code: 'invalid_request', param: 'stop' },
  { name: 'an empty stop string', body: { ...hi, stop: [''] }, status: 400, code: 'invalid_request', param: 'stop' },
  {
    name: 'stream_options without stream',
    body: { ...hi, stream_options: { include_usage: true } },
    status: 400,
    code: 'invalid_request',
    param: 'stream_options',
  },
  { name: 'n = 0', body: { ...hi, n: 0 }, status: 400, code: 'invalid_request', param: 'n' },
  { name: 'n = 129', body: { ...hi, n: 129 }, status: 400, code: 'invalid_request', param: 'n' },
  { name: 'n = 1.5', body: { ...hi, n: 1.5 }, status: 400, code: 'invalid_request', param: 'n' },
  { name: 'best_of = 2', body: { ...hi, best_of: 2 }, status: 400, code: 'invalid_request', param: 'best_of' },
  { name: 'logprobs 21', body: { ...hi, logprobs: 21 }, status: 400, code: 'invalid_request', param: 'logprobs' },
  {
    name: 'logprobs as a boolean on completions',
    body: { ...hi, logprobs: true },
    status: 400,
    code: 'invalid_request',
    param: 'logprobs',
  },
  {
    name: 'top_logprobs on completions',
    body: { ...hi, top_logprobs: 2 },
    status: 400,
    code: 'invalid_request',
    param: 'top_logprobs',
  },
  {
    name: 'logit_bias',
    body: { ...hi, logit_bias: { '5': 10 } },
    status: 400,
    code: 'invalid_request',
    param: 'logit_bias',
  },
  { name: 'echo not a boolean', body: { ...hi, echo: 'yes' }, status: 400, code: 'invalid_request', param: 'echo' },
  { name: 'suffix', body: { ...hi, suffix: 'end' }, status: 400, code: 'invalid_request', param: 'suffix' },
  {
    name: 'presence_penalty above 2',
    body: { ...hi, presence_penalty: 2.5 },
    status: 400,
    code: 'invalid_request',
    param: 'presence_penalty',
  },
  {
    name: 'frequency_penalty as a string',
    body: { ...hi, frequency_penalty: '-1' },
    status: 400,
    code: 'invalid_request',
    param: 'frequency_penalty',
  },
  {
    name: 'frequency_penalty below -2',
    body: { ...hi, frequency_penalty: -2.01 },
    status: 400,
    code: 'invalid_request',
    param: 'frequency_penalty',
  },
  {
    name: 'repetition_penalty',
    body: { ...hi, repetition_penalty: 1.2 },
    status: 400,
    code: 'invalid_request',
    param: 'repetition_penalty',
  },
  { name: 'an unknown model', body: { ...hi, model: 'gpt-9' }, status: 404, code: 'model_not_found', param: 'model' },
  {
    name: 'a prompt past the context',
    body: { prompt: 'x'.repeat(20) },
    status: 400,
    code: 'context_length_exceeded',
    param: 'prompt',
  },
  {
    name: 'messages missing',
    path: CHAT,
    body: { max_tokens: 1 },
    status: 400,
    code: 'invalid_request',
    param: 'messages',
  },
  {
    name: 'messages empty',
    path: CHAT,
    body: { messages: [] },
    status: 400,
    code: 'invalid_request',
    param: 'messages',
  },
  {
    name: 'messages as a string',
    path: CHAT,
    body: { messages: 'Hi' },
    status: 400,
    code: 'invalid_request',
    param: 'messages',
  },
  {
    name: 'an unknown role',
    path: CHAT,
    body: { messages: [{ role: 'robot', content: 'Hi' }] },
    status: 400,
    code: 'invalid_request',
    param: 'messages[0].role',
  },
  {
    name: 'a tool message without tool_call_id',
    path: CHAT,
    body: { messages: [{ role: 'tool', content: 'Hi' }] },
    status: 400,
    code: 'invalid_request',
    param: 'messages[0].tool_call_id',
  },
  {
    name: 'an image part',
    path: CHAT,
    body: { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] },
    status: 400,
    code: 'invalid_request',
    param: 'messages[0].content[0].type',
  },
  {
    name: 'a tool with a bad name',
    path: CHAT,
    body: { ...chat, tools: [{ type: 'function', function: { name: 'f g' } }] },
    status: 400,
    code: 'invalid_request',
    param: 'tools[0].function.name',
  },
  {
    name: 'tool_choice naming no tool',
    path: CHAT,
    body: {
      ...chat,
      tools: [{ type: 'function', function: { name: 'f' } }],
      tool_choice: { type: 'function', function: { name: 'g' } },
    },
    status: 400,
    code: 'invalid_request',
    param: 'tool_choice',
  },
  {
    name: 'response_format json',
    path: CHAT,
    body: { ...chat, response_format: { type: 'json_object' } },
    status: 400,
    code: 'invalid_request',
    param: 'response_format',
  },
  {
    name: 'chat logprobs as a number',
    path: CHAT,
    body: { ...chat, logprobs: 3 },
    status: 400,
    code: 'invalid_request',
    param: 'logprobs',
  },
  {
    name: 'chat top_logprobs without logprobs',
    path: CHAT,
    body: { ...chat, top_logprobs: 3 },
    status: 400,
    code: 'invalid_request',
    param: 'top_logprobs',
  },
  {
    name: 'chat top_logprobs 21',
    path: CHAT,
    body: { ...chat, logprobs: true, top_logprobs: 21 },
    status: 400,
    code: 'invalid_request',
    param: 'top_logprobs',
  },
  {
    name: 'max_completion_tokens 0',
    path: CHAT,
    body: { ...chat, max_completion_tokens: 0 },
    status: 400,
    code: 'invalid_request',
    param: 'max_completion_tokens',
  },
  { name: 'an oversize body', body: { prompt: 'x'.repeat(5000) }, status: 413, code: 'body_too_large', param: null },
];

async function expectGoodRequestSucceeds(): Promise<void> {
  const r = await send(t.url, 'POST', C, hi);
  expect(r.status).toBe(200);
  expect(r.json.choices[0].text).toBe('Hello');
}

describe('bad input', () => {
  for (const c of CASES) {
    it(`answers ${c.name} with ${c.status} ${c.code}, then serves the next request`, async () => {
      const calls = t.backend.calls.length;
      const r = await send(t.url, 'POST', c.path ?? C, c.body);
      expect(r.status).toBe(c.status);
      expect(r.json).toEqual({
        error: { message: expect.any(String), type: expect.any(String), param: c.param ?? null, code: c.code },
      });
      expect(t.backend.calls.length).toBe(calls);
      await expectGoodRequestSucceeds();
    });
  }

  it('refuses an oversize chunked body (no content-length) with 413', async () => {
    const chunks = [Buffer.from('{"prompt": "'), Buffer.alloc(6000, 0x78), Buffer.from('"}')];
    const body = new ReadableStream({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(new Uint8Array(chunk));
        controller.close();
      },
    });
    const response = await fetch(`${t.url}${C}`, { method: 'POST', body, duplex: 'half' } as RequestInit);
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('body_too_large');
    await expectGoodRequestSucceeds();
  });

  it('answers an unknown route with 404 and a wrong method with 405 and Allow', async () => {
    const missing = await send(t.url, 'POST', '/v1/audio/transcriptions', hi);
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe('route_not_found');
    const wrong = await send(t.url, 'GET', C);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect(wrong.json.error.code).toBe('method_not_allowed');
    await expectGoodRequestSucceeds();
  });
});

describe('the context-length check, before the back end is called', () => {
  // contextLength 16; 'Hi' is 3 prompt tokens (BOS, H, i).
  it('admits prompt + max_tokens = L - 1 and = L, refuses L + 1 with vLLM wording', async () => {
    for (const maxTokens of [12, 13])
      expect((await send(t.url, 'POST', C, { prompt: 'Hi', max_tokens: maxTokens })).status).toBe(200);
    const calls = t.backend.calls.length;
    const r = await send(t.url, 'POST', C, { prompt: 'Hi', max_tokens: 14 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toBe(
      "This model's maximum context length is 16 tokens. However, you requested 17 tokens (3 in the messages, 14 in the completion). " +
        'Please reduce the length of the messages or completion.',
    );
    expect(t.backend.calls.length).toBe(calls);
  });

  it('refuses a prompt that fills the context when max_tokens is not given', async () => {
    expect((await send(t.url, 'POST', C, { prompt: 'x'.repeat(14) })).status).toBe(200);
    expect(t.backend.lastCall.request.sampling.maxTokens).toBe(1);
    const r = await send(t.url, 'POST', C, { prompt: 'x'.repeat(15) });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toBe(
      "This model's maximum context length is 16 tokens. However, you requested 16 tokens in the messages. Please reduce the length of the messages.",
    );
  });

  it('is parsed by the openai client as a BadRequestError with the code', async () => {
    const client = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const error = await client.chat.completions
      .create({ model: 'fake-model', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 100 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    const e = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(e.status).toBe(400);
    expect(e.code).toBe('context_length_exceeded');
    expect(e.param).toBe('max_tokens');
    expect(e.message).toMatch(
      /^400 This model's maximum context length is 16 tokens\. However, you requested 1\d\d tokens \(\d+ in the messages, 100 in the completion\)/,
    );
    const missing = await client.completions
      .create({ model: 'gpt-9', prompt: 'Hi', max_tokens: 1 })
      .catch((x: unknown) => x);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as InstanceType<typeof OpenAI.NotFoundError>).message).toBe(
      '404 The model `gpt-9` does not exist.',
    );
    expect((missing as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
  });

  it('negative control: with the skip-admission fault point the over-long request reaches the back end', async () => {
    const faulty = await startTestServer({ contextLength: 16, faults: new FaultSet(['skip-admission']) });
    try {
      const r = await send(faulty.url, 'POST', C, { prompt: 'Hi', max_tokens: 14 });
      expect(r.status).toBe(200);
      expect(faulty.backend.calls).toHaveLength(1);
    } finally {
      await faulty.close();
    }
  });
});
