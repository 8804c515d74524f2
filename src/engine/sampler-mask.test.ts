// The sampler's token mask (structured output): only allowed ids are ever drawn, greedy takes
// the best allowed one, the draw over what is left is still a function of (seed, step), the
// logits given are never changed, and a mask that allows nothing is a broken invariant.
import { describe, expect, it } from 'vitest';
import { samplingParams } from '../core/index.js';
import { Sampler } from './sampler.js';

const VOCAB = 100;
function maskOf(allowed: readonly number[]): Int32Array {
  const mask = new Int32Array(Math.ceil(VOCAB / 32));
  for (const id of allowed) mask[id >> 5]! |= 1 << (id & 31);
  return mask;
}
const logits = Float32Array.from({ length: VOCAB }, (_, i) => Math.sin(i * 1.7) * 4);

describe('Sampler with a token mask', () => {
  it('draws only allowed ids, at any temperature, top-k and top-p', () => {
    const sampler = new Sampler(VOCAB);
    const allowed = [3, 33, 64, 65, 99];
    for (const params of [
      samplingParams({ temperature: 1 }),
      samplingParams({ temperature: 2, topK: 3 }),
      samplingParams({ temperature: 0.7, topP: 0.5 }),
    ]) {
      for (let step = 0; step < 300; step++)
        expect(allowed).toContain(sampler.sample(logits, { ...params, seed: step }, step, [], maskOf(allowed)));
    }
  });

  it('greedy picks the most likely allowed id; without a mask the most likely of all', () => {
    const sampler = new Sampler(VOCAB);
    const best = logits.indexOf(Math.max(...logits));
    const allowed = [0, 10, 20, 30].filter((id) => id !== best);
    const bestAllowed = allowed.reduce((a, b) => (logits[b]! > logits[a]! ? b : a));
    expect(sampler.sample(logits, samplingParams(), 0, [], maskOf(allowed))).toBe(bestAllowed);
    expect(sampler.sample(logits, samplingParams(), 0)).toBe(best);
  });

  it('is the same draw for the same (seed, step), and leaves the logits as given', () => {
    const sampler = new Sampler(VOCAB);
    const copy = Float32Array.from(logits);
    const params = samplingParams({ temperature: 1, seed: 9 });
    const mask = maskOf([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(sampler.sample(logits, params, 5, [], mask)).toBe(new Sampler(VOCAB).sample(logits, params, 5, [], mask));
    expect(logits).toEqual(copy);
  });

  it('refuses a mask that allows nothing', () => {
    expect(() => new Sampler(VOCAB).sample(logits, samplingParams(), 0, [], maskOf([]))).toThrow(/allows no token/);
  });
});
