// verifyDrafts on fixed logits rows with the real sampler: the verdict keeps the target
// distribution exactly (Leviathan et al.'s rule for a point-mass draft), accepts a draft with
// probability p(draft), samples every position as plain decoding would (its step index, the
// penalties over the output so far plus the accepted drafts), and reports the target's logprobs.
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, samplingParams, type BatchItem, type SamplingParams } from '../core/index.js';
import { Sampler } from './sampler.js';
import { verifyDrafts } from './spec-verify.js';

const ROW0 = [2.0, 1.5, 1.2, 0.3, -0.5, 0.9, -2.0, 1.4];
const ROW1 = [0.1, -1.0, 2.2, 0.4, 1.0, 0.0, 0.5, -0.3];
const V = ROW0.length;
const N = 20_000;
const rid = asRequestId('r');

const item = (drafts: number[]): BatchItem => ({
  rid,
  tenant: asTenantId('t'),
  tokens: [7, ...drafts],
  startPos: 10,
  tags: [],
  wantLogits: true,
  logitCount: 1 + drafts.length,
  verifiesDrafts: true,
});
const logitsOf = (rows: number[][]) => ({
  kind: 'logits' as const,
  rid,
  logits: Float32Array.from(rows.flat()),
  rows: rows.length,
});
const stateOf = (params: SamplingParams, output: number[] = [4, 4]) => ({
  params,
  numOutputTokens: output.length,
  outputTokens: () => output,
});

/** p by hand: softmax(logits / T), the top-k, then the shortest top prefix reaching top-p, renormalised. */
function target(logits: number[], params: SamplingParams): number[] {
  const w = logits.map((v) => Math.exp(v / params.temperature));
  const order = w.map((_, i) => i).sort((a, b) => w[b]! - w[a]!);
  const kept = order.slice(0, params.topK > 0 ? params.topK : V);
  const total = w.reduce((a, b) => a + b, 0);
  let mass = 0;
  let n = 0;
  while (n < kept.length && mass < params.topP * total) mass += w[kept[n++]!]!;
  const keep = new Set(kept.slice(0, n));
  const keptMass = [...keep].reduce((a, i) => a + w[i]!, 0);
  return w.map((x, i) => (keep.has(i) ? x / keptMass : 0));
}

/** Pearson's statistic against p and its 0.999 quantile (Wilson-Hilferty); a token outside p fails outright. */
function chiSquareBelow999(counts: readonly number[], p: readonly number[]): void {
  let statistic = 0;
  let dof = -1;
  counts.forEach((c, i) => {
    if (p[i] === 0) return expect(c, `token ${i} has no probability`).toBe(0);
    statistic += (c - N * p[i]!) ** 2 / (N * p[i]!);
    dof++;
  });
  expect(statistic).toBeLessThan(dof * (1 - 2 / (9 * dof) + 3.0902 * Math.sqrt(2 / (9 * dof))) ** 3);
}

describe('verifyDrafts', () => {
  const sampler = new Sampler(V);
  for (const [name, draft] of [
    ['the most likely token', 0],
    ['an unlikely token', 3],
    ['a token the top-k cuts', 6],
  ] as const) {
    it(`keeps the target distribution with ${name} drafted, accepting it with probability p(draft)`, () => {
      const counts = new Array<number>(V).fill(0);
      let numAccepted = 0;
      for (let seed = 0; seed < N; seed++) {
        const params = samplingParams({ temperature: 0.8, topK: 6, topP: 0.95, seed });
        const verdict = verifyDrafts(logitsOf([ROW0, ROW1]), item([draft]), stateOf(params), sampler);
        const first = verdict.drafts!.accepted[0]?.token ?? verdict.token;
        counts[first]!++;
        if (verdict.drafts!.accepted.length === 1) numAccepted++;
      }
      const p = target(ROW0, samplingParams({ temperature: 0.8, topK: 6, topP: 0.95 }));
      chiSquareBelow999(counts, p);
      const sd = Math.sqrt(N * p[draft]! * (1 - p[draft]!));
      expect(Math.abs(numAccepted - N * p[draft]!)).toBeLessThanOrEqual(4 * sd + 1e-9);
    });
  }

  it('samples each position as plain decoding would: its step index, penalties over the output and the accepted drafts', () => {
    const params = samplingParams({ temperature: 0.9, seed: 5, frequencyPenalty: 0.7, presencePenalty: 0.2 });
    for (let seed = 0; seed < 200; seed++) {
      const p = { ...params, seed };
      const plain0 = sampler.sample(Float32Array.from(ROW0), p, 2, [4, 4]);
      const plain1 = sampler.sample(Float32Array.from(ROW1), p, 3, [4, 4, plain0]);
      const verdict = verifyDrafts(logitsOf([ROW0, ROW1]), item([plain0]), stateOf(p), sampler);
      expect(verdict.drafts!.accepted.map((a) => a.token)).toEqual([plain0]);
      expect(verdict.token).toBe(plain1);
      const wrong = (plain0 + 1) % V;
      const rejected = verifyDrafts(logitsOf([ROW0, ROW1]), item([wrong]), stateOf(p), sampler);
      expect(rejected.drafts!.accepted).toEqual([]);
      expect(rejected.token).toBe(plain0);
    }
  });

  it("reports the target model's log-probabilities for every token it emits", () => {
    const params = samplingParams({ temperature: 0, logprobs: 2 });
    const verdict = verifyDrafts(logitsOf([ROW0, ROW1]), item([0]), stateOf(params), sampler);
    expect(verdict.drafts!.accepted).toEqual([
      { token: 0, logprob: sampler.logprobsOf(Float32Array.from(ROW0), 0, 2) },
    ]);
    expect(verdict.token).toBe(2);
    expect(verdict.logprob).toEqual(sampler.logprobsOf(Float32Array.from(ROW1), 2, 2));
  });
});
