// Log-probabilities through the openai client, over the fake back end (whose tokens come with
// made-up log-probabilities: -0.25 per step, the token itself first among the alternatives, then
// token 200, whose text is the two-byte Æ).
// Completions take `logprobs: N` and answer in the legacy shape (tokens, token_logprobs,
// top_logprobs, text_offset); chat takes `logprobs: true, top_logprobs: N` and answers with
// `content` entries (token, logprob, bytes, top_logprobs). Streamed chunks carry their tokens'.
import OpenAI from 'openai';
import type { Completion } from 'openai/resources/completions';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSdkTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;
let client: OpenAI;

beforeAll(async () => ({ t, client } = await startSdkTestServer()));
afterAll(() => t.close());

const bytes = (s: string) => [...new TextEncoder().encode(s)];

describe('completions: logprobs = N', () => {
  it('asks the back end for N alternatives and answers in the completions shape, the sampled token among the top', async () => {
    const r = await client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 3, logprobs: 2 });
    expect(t.backend.lastCall.request.sampling.logprobs).toBe(2);
    expect(r.choices[0]?.logprobs).toEqual({
      tokens: ['Hello', ' world', ','],
      token_logprobs: [-0.25, -0.5, -0.75],
      top_logprobs: [
        { Hello: -0.25, Æ: -5 },
        { ' world': -0.5, Æ: -5 },
        { ',': -0.75, Æ: -5 },
      ],
      text_offset: [0, 5, 11],
    });
  });

  it('answers logprobs: null without asking the back end', async () => {
    const r = await client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 2 });
    expect(t.backend.lastCall.request.sampling.logprobs).toBeNull();
    expect(r.choices[0]?.logprobs).toBeNull();
  });

  it("streams each token's log-probabilities with it, text offsets running on across chunks", async () => {
    const stream = await client.completions.create({
      model: 'fake-model',
      prompt: 'Hi',
      max_tokens: 3,
      logprobs: 0,
      stream: true,
    });
    const chunks: Completion[] = [];
    for await (const c of stream) chunks.push(c);
    const withLogprobs = chunks.map((c) => c.choices[0]?.logprobs).filter((l) => l !== null && l !== undefined);
    expect(withLogprobs).toEqual([
      { tokens: ['Hello'], token_logprobs: [-0.25], top_logprobs: [{ Hello: -0.25 }], text_offset: [0] },
      { tokens: [' world'], token_logprobs: [-0.5], top_logprobs: [{ ' world': -0.5 }], text_offset: [5] },
      { tokens: [','], token_logprobs: [-0.75], top_logprobs: [{ ',': -0.75 }], text_offset: [11] },
    ]);
  });
});

describe('chat: logprobs = true, top_logprobs = N', () => {
  it('answers content entries with token, logprob, bytes and the top N', async () => {
    const r = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
      logprobs: true,
      top_logprobs: 2,
    });
    expect(t.backend.lastCall.request.sampling.logprobs).toBe(2);
    expect(r.choices[0]?.logprobs).toEqual({
      content: [
        {
          token: 'Hello',
          logprob: -0.25,
          bytes: bytes('Hello'),
          top_logprobs: [
            { token: 'Hello', logprob: -0.25, bytes: bytes('Hello') },
            { token: 'Æ', logprob: -5, bytes: [195, 134] },
          ],
        },
        {
          token: ' world',
          logprob: -0.5,
          bytes: bytes(' world'),
          top_logprobs: [
            { token: ' world', logprob: -0.5, bytes: bytes(' world') },
            { token: 'Æ', logprob: -5, bytes: [195, 134] },
          ],
        },
      ],
      refusal: null,
    });
  });

  it("takes logprobs = true alone as no alternatives, and streams each token's entry with it", async () => {
    const stream = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
      logprobs: true,
      stream: true,
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    expect(t.backend.lastCall.request.sampling.logprobs).toBe(0);
    const entries = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
    expect(entries).toEqual([
      { token: 'Hello', logprob: -0.25, bytes: bytes('Hello'), top_logprobs: [] },
      { token: ' world', logprob: -0.5, bytes: bytes(' world'), top_logprobs: [] },
    ]);
  });
});
