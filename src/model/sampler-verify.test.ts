// Sampler.verify: speculative verification keeps the target distribution exactly. Over many step
// indices (each a fresh pair of seeded draws), the tokens verify() returns for a fixed draft
// follow p, the distribution sample() draws from (temperature, top-k, top-p), whichever token
// the draft is: the most likely one, an unlikely one, or one top-k cut away.
import { describe, expect, it } from 'vitest';
import { samplingParams } from '../core/index.js';
import { Sampler } from './sampler.js';

const LOGITS = new Float32Array([2.0, 1.5, 1.2, 0.3, -0.5, 0.9, -2.0, 1.4]);
const PARAMS = samplingParams({ temperature: 0.8, topK: 6, topP: 0.95, seed: 7 });
const N = 20_000;

/** p by hand: softmax(logits / T), the top-k, then the shortest top prefix reaching top-p, renormalised. */
function target(): number[] {
  const w = [...LOGITS].map((v) => Math.exp(v / PARAMS.temperature));
  const order = w.map((_, i) => i).sort((a, b) => w[b]! - w[a]!);
  const kept = order.slice(0, PARAMS.topK);
  const total = w.reduce((a, b) => a + b, 0);
  let mass = 0;
  let n = 0;
  while (n < kept.length && mass < PARAMS.topP * total) mass += w[kept[n++]!]!;
  const keep = new Set(kept.slice(0, n));
  const keptMass = [...keep].reduce((a, i) => a + w[i]!, 0);
  return w.map((x, i) => (keep.has(i) ? x / keptMass : 0));
}

/** Pearson's statistic of counts against p over the tokens p gives mass (a token outside it fails outright). */
function chiSquare(counts: readonly number[], p: readonly number[]): { statistic: number; dof: number } {
  let statistic = 0;
  let dof = -1;
  counts.forEach((c, i) => {
    if (p[i] === 0) {
      expect(c, `token ${i} has no probability`).toBe(0);
      return;
    }
    const e = N * p[i]!;
    statistic += (c - e) ** 2 / e;
    dof++;
  });
  return { statistic, dof };
}

/** The 0.999 quantile of chi-square with dof degrees of freedom (Wilson-Hilferty). */
const q999 = (dof: number): number => dof * (1 - 2 / (9 * dof) + 3.0902 * Math.sqrt(2 / (9 * dof))) ** 3;

describe('Sampler.verify (rejection sampling against a drafted token)', () => {
  const sampler = new Sampler(LOGITS.length);
  const p = target();

  it('sample() itself follows p (the reference the verdicts are held to)', () => {
    const counts = new Array<number>(LOGITS.length).fill(0);
    for (let i = 0; i < N; i++) counts[sampler.sample(LOGITS, PARAMS, i)]!++;
    const { statistic, dof } = chiSquare(counts, p);
    expect(statistic).toBeLessThan(q999(dof));
  });

  for (const [name, draft] of [
    ['the most likely token', 0],
    ['an unlikely token', 3],
    ['a token the top-k cuts', 6],
  ] as const) {
    it(`with ${name} drafted, the verdicts follow p, and the draft is accepted with probability p(draft)`, () => {
      const counts = new Array<number>(LOGITS.length).fill(0);
      for (let i = 0; i < N; i++) counts[sampler.verify(LOGITS, PARAMS, i, draft)]!++;
      const { statistic, dof } = chiSquare(counts, p);
      expect(statistic).toBeLessThan(q999(dof));
    });
  }

  it('greedy: the argmax, whatever the draft', () => {
    const greedy = samplingParams({ temperature: 0 });
    for (let draft = 0; draft < LOGITS.length; draft++) expect(sampler.verify(LOGITS, greedy, 3, draft)).toBe(0);
  });
});
