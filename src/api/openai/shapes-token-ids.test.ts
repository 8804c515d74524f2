// vLLM's `return_token_ids` extension: the prompt's and the completion's token ids in the answer,
// streamed or not. Tests that compare exact token ids across servers depend on it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send, sseData, startTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ contextLength: 64 });
});
afterAll(() => t.close());

describe('return_token_ids', () => {
  it('adds prompt_token_ids and token_ids to a completion choice', async () => {
    const r = await send(t.url, 'POST', '/v1/completions', {
      prompt: [5, 6, 7],
      max_tokens: 3,
      return_token_ids: true,
    });
    expect(r.status).toBe(200);
    expect(r.json.choices[0]).toMatchObject({
      text: 'Hello world,',
      prompt_token_ids: [5, 6, 7],
      token_ids: [100, 101, 102],
    });
  });

  it('adds prompt_token_ids at the top and token_ids to the choice of a chat answer', async () => {
    const r = await send(t.url, 'POST', '/v1/chat/completions', {
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
      return_token_ids: true,
    });
    expect(r.status).toBe(200);
    expect(r.json.prompt_token_ids).toEqual(t.backend.lastCall.request.promptTokens);
    expect(r.json.choices[0].token_ids).toEqual([100, 101]);
  });

  it('streams each chunk with its token ids, and the prompt ids first', async () => {
    const r = await send(t.url, 'POST', '/v1/completions', {
      prompt: [5, 6],
      max_tokens: 3,
      stream: true,
      return_token_ids: true,
    });
    const events = sseData(r.text);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].choices[0].prompt_token_ids).toEqual([5, 6]);
    expect(chunks.flatMap((c) => c.choices[0].token_ids ?? [])).toEqual([100, 101, 102]);
  });

  it('leaves the answer in OpenAI shape when not asked', async () => {
    const r = await send(t.url, 'POST', '/v1/completions', { prompt: [5, 6], max_tokens: 2 });
    expect(r.json.choices[0]).not.toHaveProperty('token_ids');
    expect(r.json).not.toHaveProperty('prompt_token_ids');
  });

  it('refuses a non-boolean value', async () => {
    const r = await send(t.url, 'POST', '/v1/completions', { prompt: [5], max_tokens: 1, return_token_ids: 'yes' });
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('return_token_ids');
  });
});
