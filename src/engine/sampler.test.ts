import { describe, expect, it } from 'vitest';
import { InvariantError, Rng, uniformAt } from '../core/index.js';
import { Sampler, argmax, argmaxScan, type SamplingChoice } from './sampler.js';

const choice = (o: Partial<SamplingChoice>): SamplingChoice => ({ temperature: 1, topK: 0, topP: 1, seed: 7, ...o });

/** Draw n tokens with stepIndex 0..n-1 and count them. */
function histogram(sampler: Sampler, logits: Float32Array, params: SamplingChoice, n: number): Map<number, number> {
  const counts = new Map<number, number>();
  for (let step = 0; step < n; step++) {
    const token = sampler.sample(logits, params, step);
    counts.set(token, (counts.get(token) ?? 0) + 1);
  }
  return counts;
}

describe('argmax', () => {
  it('picks the largest logit, the lowest id on ties, and never NaN', () => {
    expect(argmax(Float32Array.of(1, 3, 2))).toBe(1);
    expect(argmax(Float32Array.of(5, 1, 5))).toBe(0);
    expect(argmax(Float32Array.of(NaN, -1, NaN))).toBe(1);
  });

  it('throws when nothing is finite', () => {
    expect(() => argmax(Float32Array.of(NaN, -Infinity))).toThrow(InvariantError);
    expect(() => argmax(Float32Array.of(NaN, -Infinity, NaN, NaN, -Infinity, NaN))).toThrow(InvariantError);
  });

  it('gives the id one scan gives, over every length mod 4, ties in any lane, NaN, infinities', () => {
    const scan = (xs: Float32Array): number => {
      let best = -1;
      for (let i = 0; i < xs.length; i++) if (xs[i]! > (best < 0 ? -Infinity : xs[best]!)) best = i;
      return best;
    };
    const rng = new Rng(7);
    const pool = [NaN, -Infinity, Infinity, 0, 1, 2, 3];
    for (let trial = 0; trial < 2000; trial++) {
      const n = 1 + rng.int(23);
      // Few distinct values, so the largest is often tied across lanes.
      const xs = Float32Array.from({ length: n }, () => pool[rng.int(pool.length)]!);
      const want = scan(xs);
      if (want < 0) expect(() => argmax(xs)).toThrow(InvariantError);
      else expect(argmax(xs), `${Array.from(xs).join(',')}`).toBe(want);
    }
  });

  it('gives the same id on vocabulary-sized rows (the native argmax where the addon loads; argmaxScan)', () => {
    const rng = new Rng(8);
    const pool = [NaN, -Infinity, Infinity, 0, 1, 2, 3];
    for (let trial = 0; trial < 300; trial++) {
      const n = 1024 + rng.int(1100);
      const xs = Float32Array.from({ length: n }, () => (rng.int(4) === 0 ? pool[rng.int(pool.length)]! : rng.int(50)));
      // Now and then every value impossible but one, or all of them.
      if (trial % 50 === 1) xs.fill(NaN).fill(-Infinity, 0, n >> 1);
      if (trial % 50 === 2) xs.fill(-Infinity)[n - 1 - rng.int(40)] = -1;
      if (!xs.some((v) => v > -Infinity)) {
        expect(() => argmaxScan(xs)).toThrow(InvariantError);
        expect(() => argmax(xs)).toThrow(InvariantError);
      } else expect(argmax(xs)).toBe(argmaxScan(xs));
    }
  });
});

describe('Sampler', () => {
  const logits = Float32Array.of(0, Math.log(2), Math.log(3), Math.log(4)); // probabilities 0.1, 0.2, 0.3, 0.4

  it('is greedy at temperature 0, whatever the seed and step', () => {
    const s = new Sampler(4);
    for (let step = 0; step < 20; step++)
      expect(s.sample(logits, choice({ temperature: 0, seed: step }), step)).toBe(3);
  });

  it('draws from softmax(logits / T) with frequencies near the probabilities', () => {
    const counts = histogram(new Sampler(4), logits, choice({}), 20_000);
    for (const [id, p] of [
      [0, 0.1],
      [1, 0.2],
      [2, 0.3],
      [3, 0.4],
    ] as const)
      expect(counts.get(id)! / 20_000).toBeCloseTo(p, 1);
  });

  it('a high temperature flattens the distribution, a low one sharpens it', () => {
    const hot = histogram(new Sampler(4), logits, choice({ temperature: 100 }), 8000);
    const cold = histogram(new Sampler(4), logits, choice({ temperature: 0.05 }), 8000);
    expect(hot.get(0)! / 8000).toBeCloseTo(0.25, 1);
    expect(cold.get(3)! / 8000).toBeGreaterThan(0.99);
  });

  it('top-k keeps only the k most likely tokens', () => {
    const counts = histogram(new Sampler(4), logits, choice({ topK: 2 }), 4000);
    expect([...counts.keys()].sort()).toEqual([2, 3]);
    expect(counts.get(3)! / 4000).toBeCloseTo(4 / 7, 1);
  });

  it('top-p keeps the smallest set of most likely tokens whose mass reaches p', () => {
    // sorted: 0.4, 0.3, 0.2, 0.1 -> p = 0.6 needs {3, 2}; p = 0.75 needs {3, 2, 1}
    expect([...histogram(new Sampler(4), logits, choice({ topP: 0.6 }), 4000).keys()].sort()).toEqual([2, 3]);
    expect([...histogram(new Sampler(4), logits, choice({ topP: 0.75 }), 4000).keys()].sort()).toEqual([1, 2, 3]);
    expect([...histogram(new Sampler(4), logits, choice({ topP: 0.01 }), 500).keys()]).toEqual([3]);
  });

  it('top-k and top-p together keep the intersection, on a large vocabulary with a long tail', () => {
    const big = new Float32Array(32000).map((_, i) => -i / 1000); // every token a little less likely than the one before
    const counts = histogram(new Sampler(32000), big, choice({ topK: 50, topP: 0.9 }), 300);
    expect(Math.max(...counts.keys())).toBeLessThan(50);
    const wide = histogram(new Sampler(32000), big, choice({ topP: 0.5 }), 600);
    // mass 0.5 of a geometric tail with ratio e^-0.001 is reached after ln(2) * 1000 ≈ 693 tokens
    expect(Math.max(...wide.keys())).toBeGreaterThan(600);
    expect(Math.max(...wide.keys())).toBeLessThan(700);
  });

  it('depends only on (seed, stepIndex): a prefill node drawing token 0 and a decode node drawing the rest agree', () => {
    const params = choice({ seed: 1234, topP: 0.95 });
    const together = Array.from({ length: 16 }, (_, step) => new Sampler(4).sample(logits, params, step));
    const prefillNode = new Sampler(4).sample(logits, params, 0);
    const decodeNode = new Sampler(4);
    const split = [prefillNode, ...Array.from({ length: 15 }, (_, i) => decodeNode.sample(logits, params, i + 1))];
    expect(split).toEqual(together);
    const otherSeed = Array.from({ length: 16 }, (_, step) =>
      new Sampler(4).sample(logits, { ...params, seed: 1235 }, step),
    );
    expect(otherSeed).not.toEqual(together);
  });

  it('maps the draw u = uniformAt(seed, 0, step) through the cumulative distribution', () => {
    const s = new Sampler(4);
    for (let step = 0; step < 50; step++) {
      const u = uniformAt(7, 0, step);
      // id order when nothing is cut: cumulative 0.1, 0.3, 0.6, 1.0
      const expected = u < 0.1 ? 0 : u < 0.3 ? 1 : u < 0.6 ? 2 : 3;
      expect(s.sample(logits, choice({}), step)).toBe(expected);
    }
  });

  it('never samples a NaN logit, and leaves the logits unchanged', () => {
    const withNaN = Float32Array.of(NaN, 0, NaN, 0);
    const copy = withNaN.slice();
    const counts = histogram(new Sampler(4), withNaN, choice({}), 500);
    expect([...counts.keys()].sort()).toEqual([1, 3]);
    expect(withNaN).toEqual(copy);
  });
});

describe("Sampler: presence and frequency penalties on the request's own output", () => {
  const logits = Float32Array.of(5, 4.5, 4, 0);

  it('lower each previous token by presence once and by frequency per occurrence, before argmax', () => {
    const s = new Sampler(4);
    const greedy = choice({ temperature: 0 });
    expect(s.sample(logits, greedy, 3, [0, 0])).toBe(0); // no penalty asked: the previous output is not looked at
    expect(s.sample(logits, { ...greedy, presencePenalty: 0.6 }, 3, [0, 0, 0])).toBe(1); // 5 - 0.6 < 4.5
    expect(s.sample(logits, { ...greedy, presencePenalty: 0.6 }, 3, [0, 1])).toBe(0); // 4.4 vs 3.9 vs 4: id 0 again
    expect(s.sample(logits, { ...greedy, frequencyPenalty: 0.3 }, 3, [0])).toBe(0); // 4.7 > 4.5
    expect(s.sample(logits, { ...greedy, frequencyPenalty: 0.3 }, 3, [0, 0])).toBe(1); // 4.4 < 4.5
    expect(s.sample(logits, { ...greedy, frequencyPenalty: 0.3 }, 3, [0, 0, 0, 0, 1, 1, 1, 1])).toBe(2); // 3.8, 3.3, 4
    expect(s.sample(logits, { ...greedy, presencePenalty: -2 }, 3, [3])).toBe(0); // a negative penalty raises: 2 < 5
    expect(s.sample(logits, { ...greedy, presencePenalty: -2, frequencyPenalty: -2 }, 3, [3, 3])).toBe(3); // 0 + 2 + 4 = 6
  });

  it('never changes the logits it is given, and forgets the counts of one call by the next', () => {
    const s = new Sampler(4);
    const before = logits.slice();
    const params = choice({ temperature: 0, frequencyPenalty: 2 });
    expect(s.sample(logits, params, 0, [0, 0, 0])).toBe(1);
    expect(logits).toEqual(before);
    expect(s.sample(logits, params, 0, [1])).toBe(0); // no count of id 0 left over
  });

  it('shift the distribution a draw is made from, leaving the draw itself (seed, step) unchanged', () => {
    const s = new Sampler(4);
    const flat = new Float32Array(4);
    const penalized = histogram(s, flat, choice({}), 4000);
    const counts = new Map<number, number>();
    for (let step = 0; step < 4000; step++) {
      const t = s.sample(flat, choice({ presencePenalty: Math.log(3) }), step, [0]);
      counts.set(t, (counts.get(t) ?? 0) + 1);
    }
    // id 0's weight drops to 1/3 of the others': probability 0.1 instead of 0.25.
    expect((penalized.get(0) ?? 0) / 4000).toBeCloseTo(0.25, 1);
    expect((counts.get(0) ?? 0) / 4000).toBeCloseTo(0.1, 1);
  });

  it('refuses a previous token outside the vocabulary', () => {
    expect(() => new Sampler(4).sample(logits, choice({ presencePenalty: 1 }), 0, [4])).toThrow(InvariantError);
  });
});

describe("Sampler.logprobsOf: the model's own distribution at a position", () => {
  it('gives log-softmax of the logits for the token and the top N, most likely first, lower id first on ties', () => {
    const s = new Sampler(5);
    const logits = Float32Array.of(1, 3, 2, 3, NaN);
    const z = Math.log(Math.exp(1) + Math.exp(3) + Math.exp(2) + Math.exp(3));
    const r = s.logprobsOf(logits, 2, 3);
    expect(r.logprob).toBeCloseTo(2 - z, 6);
    expect(r.top.map((t) => t.id)).toEqual([1, 3, 2]);
    expect(r.top.map((t) => t.logprob)).toEqual([3 - z, 3 - z, 2 - z].map((x) => expect.closeTo(x, 6)));
    expect(s.logprobsOf(logits, 4, 0)).toEqual({ logprob: -9999, top: [] }); // floored: JSON has no -Infinity
    expect(s.logprobsOf(logits, 0, 10).top.map((t) => t.id)).toEqual([1, 3, 2, 0]); // NaN is never a candidate
  });

  it('is computed from the logits as given, whatever the sampling parameters did with them', () => {
    const s = new Sampler(4);
    const logits = Float32Array.of(5, 4.5, 4, 0);
    const token = s.sample(logits, { ...choice({ temperature: 0 }), frequencyPenalty: 2 }, 1, [0]);
    expect(token).toBe(1);
    const probs = [...logits].map((v) => Math.exp(v));
    expect(s.logprobsOf(logits, token, 1)).toEqual({
      logprob: expect.closeTo(Math.log(probs[1]! / probs.reduce((a, b) => a + b)), 6),
      top: [{ id: 0, logprob: expect.closeTo(Math.log(probs[0]! / probs.reduce((a, b) => a + b)), 6) }],
    });
  });

  it('finds the same top N as a full sort on a large vocabulary', () => {
    const n = 5000;
    const logits = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 12.9898) * 10);
    const expected = [...logits.keys()].sort((a, b) => logits[b]! - logits[a]! || a - b).slice(0, 20);
    expect(new Sampler(n).logprobsOf(logits, 7, 20).top.map((t) => t.id)).toEqual(expected);
  });
});
