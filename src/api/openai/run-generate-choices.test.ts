// `n` choices per request (of each prompt, for several prompts) through the openai client: n
// back-end requests with their own rids and seeds (seed + i), answered together; streamed chunks
// carry their choice's index; usage counts each prompt once and every choice's completion; one
// failing choice fails the request and aborts the others.
import OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequestError, type GenerateEvent } from '../../core/index.js';
import { untilAbortScript, wordScript, type FakeScript } from '../testing/fake-backend.js';
import { send, sseData, startSdkTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;
let client: OpenAI;

beforeAll(async () => ({ t, client } = await startSdkTestServer()));
afterAll(() => t.close());
afterEach(() => {
  t.backend.script = wordScript();
});

/** The word script, with the request's seed as the first token's text (so choices differ) and `length` tokens. */
function seededScript(lengthOf: (seed: number) => number = () => 2): FakeScript {
  return async function* (request, signal) {
    const { seed } = request.sampling;
    yield { type: 'tokens', ids: [seed % 1000], text: `<${seed}>` };
    const rest: GenerateEvent[] = [];
    for await (const e of wordScript()(
      { ...request, sampling: { ...request.sampling, maxTokens: lengthOf(seed) - 1 } },
      signal,
    ))
      rest.push(e);
    for (const e of rest) {
      yield e.type === 'finished' ? { ...e, usage: { ...e.usage, completionTokens: lengthOf(seed) } } : e;
    }
  };
}

describe('n choices per request', () => {
  it('answers n choices in index order, each from its own back-end request with seed + i; usage counts the prompt once', async () => {
    t.backend.script = seededScript((seed) => (seed % 2 === 0 ? 2 : 3));
    const before = t.backend.calls.length;
    const r = await client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 5, n: 3, seed: 10 });
    const calls = t.backend.calls.slice(before);
    expect(calls.map((c) => c.request.sampling.seed)).toEqual([10, 11, 12]);
    expect(new Set(calls.map((c) => c.request.rid)).size).toBe(3);
    expect(calls.every((c) => c.request.promptTokens.length === 3)).toBe(true);
    expect(r.choices.map((c) => [c.index, c.text, c.finish_reason])).toEqual([
      [0, '<10>Hello', 'length'],
      [1, '<11>Hello world', 'length'],
      [2, '<12>Hello', 'length'],
    ]);
    expect(r.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 2 + 3 + 2, total_tokens: 10 });
  });

  it('gives choice 0 of a seeded request exactly what n = 1 gives', async () => {
    t.backend.script = seededScript();
    const one = await client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 5, seed: 77 });
    const three = await client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 5, seed: 77, n: 3 });
    expect(three.choices[0]?.text).toBe(one.choices[0]?.text);
    expect(three.choices[1]?.text).not.toBe(one.choices[0]?.text);
  });

  it('streams chat chunks with their choice index: a role opening and a finish per choice, one usage, one [DONE]', async () => {
    t.backend.script = seededScript((seed) => (seed === 5 ? 2 : 4));
    const stream = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 5,
      n: 2,
      seed: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const byIndex = (i: number) => chunks.flatMap((c) => c.choices.filter((x) => x.index === i));
    for (const [i, text, count] of [
      [0, '<5>Hello', 2],
      [1, '<6>Hello world,', 4],
    ] as const) {
      const mine = byIndex(i);
      expect(mine[0]?.delta).toEqual({ role: 'assistant', content: '' });
      expect(mine.map((x) => x.delta.content ?? '').join('')).toBe(text);
      expect(mine.filter((x) => x.finish_reason !== null).map((x) => x.finish_reason)).toEqual(['length']);
      expect(mine.at(-1)?.finish_reason).toBe('length');
      expect(mine.filter((x) => x.delta.content !== undefined && x.delta.content !== '').length).toBe(count);
    }
    expect(chunks.every((c) => c.id === chunks[0]?.id)).toBe(true);
    expect(chunks.at(-1)?.choices).toEqual([]);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(6);
    const raw = await send(t.url, 'POST', '/v1/chat/completions', {
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 3,
      n: 2,
      stream: true,
    });
    expect(sseData(raw.text).filter((d) => d === '[DONE]')).toHaveLength(1);
  });

  it("fails the whole request when one choice fails, with that choice's error, and aborts the others", async () => {
    const signals: AbortSignal[] = [];
    const waiting = untilAbortScript(1);
    t.backend.script = (request, signal) => {
      signals.push(signal);
      if (request.sampling.seed === 21) {
        return (async function* (): AsyncIterable<GenerateEvent> {
          yield { type: 'failed', error: new InvalidRequestError('choice 1 cannot be served', 'prompt') };
        })();
      }
      return waiting(request, signal);
    };
    const r = await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 5, n: 3, seed: 20 });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ message: 'choice 1 cannot be served', code: 'invalid_request' });
    expect(signals).toHaveLength(3);
    expect(signals.every((s) => s.aborted)).toBe(true);
    // The server goes on serving.
    t.backend.script = wordScript();
    expect(
      (await client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 2, n: 2 })).choices,
    ).toHaveLength(2);
  });

  it("answers several prompts (OpenAI's batch form) with n choices each, in prompt order; usage counts every prompt once", async () => {
    t.backend.script = seededScript();
    const before = t.backend.calls.length;
    const r = await send(t.url, 'POST', '/v1/completions', {
      prompt: ['Hi', [5, 6, 7, 8]],
      max_tokens: 4,
      n: 2,
      seed: 30,
      return_token_ids: true,
    });
    expect(r.status).toBe(200);
    const calls = t.backend.calls.slice(before);
    expect(calls.map((c) => [c.request.promptTokens.length, c.request.sampling.seed])).toEqual([
      [3, 30],
      [3, 31],
      [4, 30],
      [4, 31],
    ]);
    const choices = r.json.choices as { index: number; text: string; prompt_token_ids: number[] }[];
    expect(choices.map((c) => [c.index, c.text.slice(0, 4), c.prompt_token_ids.length])).toEqual([
      [0, '<30>', 3],
      [1, '<31>', 3],
      [2, '<30>', 4],
      [3, '<31>', 4],
    ]);
    expect(r.json.usage).toMatchObject({ prompt_tokens: 3 + 4, completion_tokens: 4 * 2 });
  });

  it('refuses the whole batch when one prompt does not fit the context, before any back-end call', async () => {
    const before = t.backend.calls.length;
    const r = await send(t.url, 'POST', '/v1/completions', { prompt: ['Hi', 'x'.repeat(70)], max_tokens: 4 });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'context_length_exceeded', param: 'max_tokens' });
    expect(t.backend.calls.length).toBe(before);
  });

  it('refuses n outside [1, 128], and best_of, with a 400 naming the parameter', async () => {
    for (const [body, param] of [
      [{ n: 0 }, 'n'],
      [{ n: 129 }, 'n'],
      [{ n: 2, best_of: 3 }, 'best_of'],
    ] as const) {
      const r = await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 1, ...body });
      expect(r.status).toBe(400);
      expect(r.json.error.param).toBe(param);
    }
  });
});
