// gpt-oss through disaggregated `tessera up`, unchanged: moe.test.ts's pattern (PD against
// co-located `tessera serve`, both --deterministic) with gen-model's gpt-oss-tiny, MXFP4 experts
// (repacked to q8_0 on every node), o200k and harmony. Its sinks and sliding-window layers are
// attention over the same pages (a 74-token prompt outgrows the window of 4), so prefill's KV pages,
// the page checks, KvDone's fingerprint (which covers gptOss) and decode need nothing gpt-oss-specific:
// a prompt's log-probabilities and a greedy chat answer are the same, number for number, as co-located serve's.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genModel } from '../../../src/gen/index.js';
import type { Server } from '../support/process.js';
import { promptIds, testHome, upBesideServe, type UpBesideServe } from './support.js';

let home: Awaited<ReturnType<typeof testHome>>;
let up: UpBesideServe;
let colocated: Server;
let pd: OpenAI;
let model: string;

beforeAll(async () => {
  home = await testHome();
  model = join(home.dir, 'gpt-oss-tiny-mxfp4.gguf');
  await genModel({ preset: 'gpt-oss-tiny', format: 'gguf', out: model, seed: 2, dtype: 'mxfp4' });
  up = await upBesideServe(['--model', model, '--deterministic', '--context-length', '256'], home.dir);
  ({ colocated, pd } = up);
});
afterAll(async () => {
  await up?.stop();
  await home?.remove();
});

describe('gpt-oss through tessera up', () => {
  it("scores a prompt's tokens as co-located serve does (prefill's KV carried to decode)", async () => {
    const body = { model, prompt: [promptIds(70)], max_tokens: 4, logprobs: 1, echo: true, temperature: 0 };
    const [ours, reference] = await Promise.all([
      pd.completions.create(body),
      colocated.client().completions.create(body),
    ]);
    const lp = ours.choices[0]?.logprobs as unknown as { token_logprobs: (number | null)[] };
    expect(lp.token_logprobs).toHaveLength(74);
    expect(ours.choices[0]?.logprobs).toEqual(reference.choices[0]?.logprobs);
    expect(ours.choices[0]?.text).toBe(reference.choices[0]?.text);
  });

  it('answers a chat greedily with the same tokens as co-located serve', async () => {
    const body = {
      model,
      messages: [{ role: 'user' as const, content: 'Name three colours.' }],
      max_tokens: 16,
      temperature: 0,
    };
    const [ours, reference] = await Promise.all([
      pd.chat.completions.create(body),
      colocated.client().chat.completions.create(body),
    ]);
    expect(ours.usage).toEqual(reference.usage);
    expect(ours.usage?.completion_tokens).toBeGreaterThan(0);
    expect(ours.choices[0]?.message.content).toBe(reference.choices[0]?.message.content);
  });
});
