// A temperature so small that 1/T overflows (5e-324, 1e-200) once crashed the whole worker
// ("logprobs of token undefined", then "the worker stopped after an internal error"): it found
// by the HTTP fuzz. Below GREEDY_BELOW_TEMPERATURE the sampler is greedy, as vLLM is below 1e-5.
import { describe, expect, it } from 'vitest';
import { GREEDY_BELOW_TEMPERATURE, Sampler } from './sampler.js';

describe('Sampler with a vanishing temperature', () => {
  it('samples the argmax for temperatures below 1e-5, down to the smallest double', () => {
    const logits = new Float32Array([0.5, 3, -1, 2.9]);
    for (const temperature of [Number.MIN_VALUE, 4e-323, 1e-200, 1e-38, 9e-6]) {
      for (let step = 0; step < 5; step++)
        expect(new Sampler(4).sample(logits, { temperature, topP: 1, topK: 0, seed: step }, step)).toBe(1);
    }
    expect(GREEDY_BELOW_TEMPERATURE).toBe(1e-5);
  });
});
