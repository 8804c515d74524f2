// The official openai client (6.49.0) against the API over a fake back end: completions and
// chat, streamed and not, usage, include_usage, stop, sampling parameters, ids, models.
import OpenAI from 'openai';
import type { Completion } from 'openai/resources/completions';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeCodec } from '../testing/fake-backend.js';
import { send, sseData, startSdkTestServer, startTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;
let client: OpenAI;

beforeAll(async () => ({ t, client } = await startSdkTestServer()));
afterAll(() => t.close());

const usage = (prompt: number, completion: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  prompt_tokens_details: { cached_tokens: 0 },
});

describe('POST /v1/completions through the openai client', () => {
  it('answers a text prompt with text, finish_reason and usage', async () => {
    const r = await client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 3 });
    expect(r.object).toBe('text_completion');
    expect(r.id).toMatch(/^cmpl-[0-9a-f]{8}-\d+$/);
    expect(r.model).toBe('fake-model');
    expect(r.choices).toEqual([{ index: 0, text: 'Hello world,', logprobs: null, finish_reason: 'length' }]);
    // BOS + 'H' + 'i'
    expect(r.usage).toEqual(usage(3, 3));
    expect(t.backend.lastCall.request.promptTokens).toEqual([1, 'H'.charCodeAt(0) + 2, 'i'.charCodeAt(0) + 2]);
  });

  it('takes token ids as the prompt, exactly as given (no BOS added)', async () => {
    await client.completions.create({ model: 'fake-model', prompt: [5, 6, 7], max_tokens: 1 });
    expect(t.backend.lastCall.request.promptTokens).toEqual([5, 6, 7]);
    await client.completions.create({ model: 'fake-model', prompt: [[8, 9]], max_tokens: 1 });
    expect(t.backend.lastCall.request.promptTokens).toEqual([8, 9]);
  });

  it('ends at a stop string, withholding it, with finish_reason stop', async () => {
    const r = await client.completions.create({
      model: 'fake-model',
      prompt: 'Hi',
      max_tokens: 10,
      stop: [' this', 'zzz'],
    });
    expect(r.choices[0]?.text).toBe('Hello world,');
    expect(r.choices[0]?.finish_reason).toBe('stop');
    expect(t.backend.lastCall.request.sampling.stop).toEqual([' this', 'zzz']);
  });

  it('streams text chunks, a final chunk with finish_reason, and usage last with include_usage', async () => {
    const stream = await client.completions.create({
      model: 'fake-model',
      prompt: 'Hi',
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.text)).toEqual(['Hello', ' world', ',', '', undefined]);
    expect(chunks.map((c) => c.choices[0]?.finish_reason ?? null)).toEqual([null, null, null, 'length', null]);
    expect(chunks.every((c) => c.object === 'text_completion' && c.id === chunks[0]?.id)).toBe(true);
    expect(chunks.at(-1)?.choices).toEqual([]);
    expect(chunks.at(-1)?.usage).toEqual(usage(3, 3));
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });

  it('writes SSE exactly: data lines, blank-line separated, [DONE] last', async () => {
    const r = await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 2, stream: true });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const events = sseData(r.text);
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.slice(0, -1).map((e) => JSON.parse(e).choices[0].text)).toEqual(['Hello', ' world', '']);
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
  });
});

describe('POST /v1/chat/completions through the openai client', () => {
  it('renders the chat template, encodes it without an extra BOS, and answers a message', async () => {
    const r = await client.chat.completions.create({
      model: 'fake-model',
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Hi' },
            { type: 'text', text: 'there' },
          ],
        },
      ],
      max_completion_tokens: 2,
    });
    expect(r.object).toBe('chat.completion');
    expect(r.id).toMatch(/^chatcmpl-/);
    expect(r.choices).toEqual([
      {
        index: 0,
        message: { role: 'assistant', content: 'Hello world', refusal: null },
        logprobs: null,
        finish_reason: 'length',
      },
    ]);
    const rendered = '<|system|>Be brief.\n<|user|>Hi\nthere\n<|assistant|>';
    expect(t.backend.lastCall.request.promptTokens).toEqual(fakeCodec.encode(rendered, { addSpecialTokens: false }));
    expect(r.usage).toEqual(usage(rendered.length, 2));
  });

  it('streams the role first, then content deltas, then finish_reason, then usage', async () => {
    const stream = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta)).toEqual([
      { role: 'assistant', content: '' },
      { content: 'Hello' },
      { content: ' world' },
      {},
      undefined,
    ]);
    expect(chunks.map((c) => c.choices[0]?.finish_reason ?? null)).toEqual([null, null, null, 'length', null]);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(2);
  });

  it('streams without a usage chunk when include_usage is not asked', async () => {
    const stream = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 1,
      stream: true,
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks).toHaveLength(3);
    expect(chunks.every((c) => c.usage === undefined && c.choices.length === 1)).toBe(true);
  });

  it('streams a stop-string finish', async () => {
    const stream = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 9,
      stop: ',',
      stream: true,
    });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toBe('Hello world');
    expect(finish).toBe('stop');
  });
});

describe('sampling parameters reach the back end', () => {
  it('passes temperature, top_p, top_k, seed, stop, penalties and max_tokens through', async () => {
    await client.completions.create({
      model: 'fake-model',
      prompt: 'Hi',
      max_tokens: 4,
      temperature: 0.5,
      top_p: 0.9,
      seed: 7,
      stop: 'x',
      top_k: 5,
      presence_penalty: 0.25,
      frequency_penalty: -0.5,
    } as never);
    expect(t.backend.lastCall.request.sampling).toEqual({
      maxTokens: 4,
      temperature: 0.5,
      topP: 0.9,
      topK: 5,
      seed: 7,
      stop: ['x'],
      stopTokenIds: [],
      ignoreEos: false,
      presencePenalty: 0.25,
      frequencyPenalty: -0.5,
      logprobs: null,
    });
  });

  it('defaults max_tokens to what remains of the context, as vLLM does', async () => {
    await client.completions.create({ model: 'fake-model', prompt: 'Hi' });
    expect(t.backend.lastCall.request.sampling.maxTokens).toBe(64 - 3);
  });

  it('draws a different seed per request when none is given, reproducibly from the server seed', async () => {
    const first = await startTestServer({ seed: 5 });
    const second = await startTestServer({ seed: 5 });
    try {
      for (const s of [first, second]) {
        for (let i = 0; i < 2; i++) await send(s.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 1 });
      }
      const seeds = (s: TestServer) => s.backend.calls.map((c) => c.request.sampling.seed);
      expect(seeds(first)).toEqual(seeds(second));
      expect(new Set(seeds(first)).size).toBe(2);
      expect(first.backend.calls.map((c) => c.request.rid)).toEqual(second.backend.calls.map((c) => c.request.rid));
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });

  it('gives every request its own rid', async () => {
    const before = t.backend.calls.length;
    await Promise.all(
      [1, 2, 3, 4].map(() => client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 1 })),
    );
    const rids = t.backend.calls.slice(before).map((c) => c.request.rid);
    expect(new Set(rids).size).toBe(4);
  });

  it('accepts and ignores `user`, n = 1, zero penalties and unknown fields', async () => {
    const r = await send(t.url, 'POST', '/v1/completions', {
      prompt: 'Hi',
      max_tokens: 1,
      user: 'u-1',
      n: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      some_future_field: true,
    });
    expect(r.status).toBe(200);
  });
});

describe('GET /v1/models, /health', () => {
  it('lists the served model with its root and max_model_len', async () => {
    const models = await client.models.list();
    expect(models.data).toEqual([
      expect.objectContaining({
        id: 'fake-model',
        object: 'model',
        owned_by: 'tessera',
        root: '/models/fake',
        max_model_len: 64,
      }),
    ]);
  });

  it('reports health from the back end, 503 when it is unhealthy', async () => {
    expect((await send(t.url, 'GET', '/health')).json).toEqual({ status: 'ok', backend: 'fake' });
    const healthy = t.backend.health;
    t.backend.health = async () => ({ healthy: false, detail: { reason: 'decode worker lost' } });
    try {
      const r = await send(t.url, 'GET', '/health');
      expect(r.status).toBe(503);
      expect(r.json).toEqual({ status: 'unhealthy', reason: 'decode worker lost' });
    } finally {
      t.backend.health = healthy;
    }
  });
});
