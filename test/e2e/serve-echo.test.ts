// A prompt's own log-probabilities from a real `tessera serve` process (gen-model's tiny Llama as
// an f32 GGUF), through the official openai client, in lm-evaluation-harness's `loglikelihood`
// request shape: POST /v1/completions with prompts = context + continuation as token ids,
// max_tokens 1, logprobs 1, echo true, temperature 0; the score is the sum of the continuation's
// token_logprobs[ctxlen:-1], greedy when each is its position's top. Checked against llama.cpp
// (node-llama-cpp 3.21.1, CPU, one thread, F32 KV) on the same file: every prompt token's
// log-probability within 2e-3 (f32 engines differ by float rounding only; the f32 equivalence
// test holds full logits within 1e-3), the sums within 1e-2, is_greedy the same. Also max_tokens 0
// (the prompt alone), vLLM's prompt_logprobs, each streamed (chunks joined equal the JSON answer),
// and the 400s.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genModel } from '../../src/gen/index.js';
import { LlamaCpp } from '../llama-cpp/drivers.js';
import { jsonChoices, joinCompletionStream } from './support/completion-stream.js';
import { startServer, useTestHome, type Server } from './support/process.js';

/** "The quick brown fox" + " jumps over the lazy dog" in the Llama 2 vocabulary, BOS first. */
const CONTEXT = [1, 450, 4996, 17354, 1701, 29916];
const CONTINUATION = [432, 17204, 975, 278, 17366, 11203];
const OTHER = [1, 450, 17366, 11203, 432, 17204, 975, 278, 4996, 17354];

const home = useTestHome();
let server: Server;
let client: OpenAI;
let path: string;
let llamaCpp: LlamaCpp;

beforeAll(async () => {
  path = join(home.dir, 'tiny-f32.gguf');
  await genModel({ preset: 'tiny', format: 'gguf', out: path, seed: 3, dtype: 'f32' });
  [server, llamaCpp] = await Promise.all([
    startServer(['--model', path, '--context-length', '128', '--kv-pages', '64'], home.dir),
    LlamaCpp.start(),
  ]);
  client = server.client();
});
afterAll(async () => {
  await server?.stop();
  await llamaCpp?.dispose();
});

/** llama.cpp's log-probability of each prompt token after the ones before it (the first: null), and whether it was the top. */
async function llamaCppPrompt(ids: readonly number[]): Promise<{ logprob: number | null; greedy: boolean }[]> {
  const model = await llamaCpp.llama.loadModel({ modelPath: path });
  const context = await model.createContext({
    contextSize: 128,
    sequences: 1,
    threads: 1,
    flashAttention: false,
    experimentalKvCacheKeyType: 'F32',
    experimentalKvCacheValueType: 'F32',
  });
  try {
    const next = { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } };
    const results = await context.getSequence().controlledEvaluate(ids.map((t) => [t, next]) as never);
    return ids.map((id, p) => {
      if (p === 0) return { logprob: null, greedy: true };
      const probabilities = (results as { next?: { probabilities?: Map<number, number> } }[])[p - 1]?.next
        ?.probabilities as Map<number, number>;
      let best = -1;
      let bestP = -1;
      for (const [t, q] of probabilities) if (q > bestP) [best, bestP] = [t, q];
      return { logprob: Math.log(probabilities.get(id) ?? 0), greedy: best === id };
    });
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

type Logprobs = {
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  tokens: string[];
};

/** lm-evaluation-harness's parse_logprobs for one choice. */
function loglikelihood(logprobs: Logprobs, ctxlen: number): { sum: number; isGreedy: boolean } {
  const tokens = logprobs.token_logprobs.slice(ctxlen, -1) as number[];
  const tops = logprobs.top_logprobs.slice(ctxlen, -1) as Record<string, number>[];
  const isGreedy = tokens.every((lp, i) => lp === Math.max(...Object.values(tops[i] as Record<string, number>)));
  return { sum: tokens.reduce((a, b) => a + b, 0), isGreedy };
}

describe('echo + logprobs: the prompt scored as lm-evaluation-harness asks', () => {
  it('gives every prompt token its log-probability, as llama.cpp computes it on the same GGUF', async () => {
    // The model's own greedy continuation of CONTEXT must score as greedy.
    const greedy = (await client.completions.create({
      model: path,
      prompt: CONTEXT,
      max_tokens: 4,
      temperature: 0,
      ignore_eos: true,
      return_token_ids: true,
    } as never)) as unknown as { choices: { token_ids: number[] }[] };
    const own = greedy.choices[0]?.token_ids ?? [];
    expect(own).toHaveLength(4);
    const prompts = [[...CONTEXT, ...CONTINUATION], OTHER, [...CONTEXT, ...own]];
    const ctxlens = [CONTEXT.length, 4, CONTEXT.length];
    const r = await client.completions.create({
      model: path,
      prompt: prompts,
      max_tokens: 1,
      logprobs: 1,
      echo: true,
      temperature: 0,
      seed: 1234,
    });
    expect(r.choices).toHaveLength(3);
    for (const choice of [...r.choices].sort((a, b) => a.index - b.index)) {
      const ids = prompts[choice.index] as number[];
      const logprobs = choice.logprobs as unknown as Logprobs;
      expect(logprobs.token_logprobs).toHaveLength(ids.length + 1); // the prompt, then the one generated
      expect(logprobs.token_logprobs[0]).toBeNull();
      expect(logprobs.top_logprobs[0]).toBeNull();
      const theirs = await llamaCppPrompt(ids);
      let maxDiff = 0;
      for (let p = 1; p < ids.length; p++)
        maxDiff = Math.max(maxDiff, Math.abs((logprobs.token_logprobs[p] as number) - (theirs[p]?.logprob as number)));
      const ctxlen = ctxlens[choice.index] as number;
      const ours = loglikelihood(logprobs, ctxlen);
      const theirSum = theirs.slice(ctxlen).reduce((a, t) => a + (t.logprob as number), 0);
      console.log(
        `prompt ${choice.index}: max |logprob diff| vs llama.cpp ${maxDiff.toExponential(2)} over ${ids.length - 1} tokens; loglikelihood ${ours.sum.toFixed(4)} vs ${theirSum.toFixed(4)}, greedy ${ours.isGreedy}`,
      );
      expect(maxDiff).toBeLessThan(2e-3);
      expect(Math.abs(ours.sum - theirSum)).toBeLessThan(1e-2);
      expect(ours.isGreedy).toBe(theirs.slice(ctxlen).every((t) => t.greedy));
      if (choice.index === 2) expect(ours.isGreedy).toBe(true);
    }
    expect(r.usage?.completion_tokens).toBe(3);
  });

  it('with max_tokens 0 answers the prompt alone: its text, its tokens, no completion tokens', async () => {
    const ids = [...CONTEXT, ...CONTINUATION];
    const [zero, one] = await Promise.all([
      client.completions.create({ model: path, prompt: ids, max_tokens: 0, logprobs: 0, echo: true }),
      client.completions.create({ model: path, prompt: ids, max_tokens: 1, logprobs: 0, echo: true }),
    ]);
    const z = zero.choices[0]?.logprobs as unknown as Logprobs;
    const o = one.choices[0]?.logprobs as unknown as Logprobs;
    expect(z.token_logprobs).toEqual(o.token_logprobs.slice(0, -1));
    expect(z.tokens).toEqual(o.tokens.slice(0, -1));
    expect(zero.choices[0]?.finish_reason).toBe('length');
    expect(zero.usage).toMatchObject({ prompt_tokens: ids.length, completion_tokens: 0 });
    expect(one.choices[0]?.text.startsWith(zero.choices[0]?.text ?? '?')).toBe(true);
  });

  it("answers vLLM's prompt_logprobs: null first, then each token's {logprob, rank, decoded_token} and the top N", async () => {
    const ids = [...CONTEXT, ...CONTINUATION];
    const echo = await client.completions.create({ model: path, prompt: ids, max_tokens: 1, logprobs: 2, echo: true });
    const r = (await client.completions.create({
      model: path,
      prompt: ids,
      max_tokens: 1,
      prompt_logprobs: 2,
    } as never)) as unknown as {
      choices: { prompt_logprobs: (Record<string, { logprob: number; rank: number }> | null)[] }[];
    };
    const list = r.choices[0]?.prompt_logprobs ?? [];
    expect(list).toHaveLength(ids.length);
    expect(list[0]).toBeNull();
    const echoed = (echo.choices[0]?.logprobs as unknown as Logprobs).token_logprobs;
    for (let p = 1; p < ids.length; p++) {
      const entry = list[p] as Record<string, { logprob: number; rank: number }>;
      expect(entry[String(ids[p])]?.logprob).toBe(echoed[p]);
      const ranks = Object.values(entry).map((e) => e.rank);
      expect(ranks).toContain(1);
      expect(Object.keys(entry).length).toBeGreaterThanOrEqual(2);
    }
  });

  it('streams echo + logprobs (and prompt_logprobs, and max_tokens 0) as the JSON answer, joined chunk by chunk', async () => {
    const ids = [...CONTEXT, ...CONTINUATION];
    const cases = [
      { max_tokens: 3, logprobs: 2, echo: true, prompt: [ids, OTHER] },
      { max_tokens: 2, prompt_logprobs: 1, prompt: ids },
      { max_tokens: 0, logprobs: 0, echo: true, prompt: ids },
    ];
    for (const c of cases) {
      const body = { model: path, temperature: 0, ignore_eos: true, ...c };
      const [json, stream] = await Promise.all([
        client.completions.create(body as never) as Promise<OpenAI.Completions.Completion>,
        client.completions.create({ ...body, stream: true } as never) as unknown as Promise<
          AsyncIterable<OpenAI.Completions.Completion>
        >,
      ]);
      expect(await joinCompletionStream(stream)).toEqual(jsonChoices(json));
    }
  });

  it('refuses what it cannot answer with a 400 that names the field, and keeps serving', async () => {
    const bad = async (body: object) => {
      const e = await client.completions.create(body as never).catch((error: unknown) => error);
      expect(e).toBeInstanceOf(OpenAI.BadRequestError);
      return (e as InstanceType<typeof OpenAI.BadRequestError>).param;
    };
    expect(await bad({ model: path, prompt: CONTEXT, max_tokens: 0 })).toBe('max_tokens');
    expect(await bad({ model: path, prompt: CONTEXT, prompt_logprobs: 21 })).toBe('prompt_logprobs');
    const chat = await client.chat.completions
      .create({ model: path, messages: [{ role: 'user', content: 'hi' }], echo: true } as never)
      .catch((error: unknown) => error);
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError);
    const ok = await client.completions.create({ model: path, prompt: CONTEXT, max_tokens: 2, echo: true });
    expect(ok.choices[0]?.text.length).toBeGreaterThan(0);
  });
});
