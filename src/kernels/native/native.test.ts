import { beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../core/index.js';
import { batchInvarianceCases, denseCases } from '../cases/dense-cases.js';
import { expectBitwiseEqual, randomF32, randomWeight } from '../cases/support.js';
import type { WeightDType } from '../types.js';
import { NativeDense, nativeAvailability } from './native.js';

// Activations quantized (rounded, for f16/bf16) as llama.cpp does: the suite compares with the
// reference run on those activations, at the float tolerance (dense-cases.ts).
const AS_LLAMA_CPP = { activations: 'llama.cpp' } as const;

describe('the native addon', () => {
  it('is built and usable on this machine (CI builds it with gcc)', () => {
    const found = nativeAvailability();
    expect('why' in found ? found.why : 'ok').toBe('ok');
  });
});

// The helper threads are one set per process: each describe sets the configuration it tests.
describe('NativeDense (the calling thread alone) runs the dense case suite', () => {
  let native: NativeDense;
  beforeAll(() => {
    native = new NativeDense({ threads: 1 });
  });
  for (const c of denseCases(AS_LLAMA_CPP)) it(c.name, () => c.run(native));
  for (const c of batchInvarianceCases()) it(c.name, () => c.run(native));
  it('refuses a weight prepared by another NativeDense', async () => {
    const weight = await new NativeDense().prepare(randomWeight(new Rng(1), 'q4_0', 4, 64));
    await expect(native.matmul(weight, randomF32(new Rng(2), 64), 1)).rejects.toThrow(
      /not prepared by this NativeDense/,
    );
  });
});

describe('NativeDense with helper threads sharing every call', () => {
  let threaded: NativeDense;
  beforeAll(() => {
    threaded = new NativeDense({ threads: 3, helperMinM: 1, spinMicros: 50 });
  });
  for (const c of denseCases(AS_LLAMA_CPP)) it(c.name, () => c.run(threaded));

  const DTYPES: readonly WeightDType[] = ['f32', 'f16', 'bf16', 'q4_0', 'q8_0', 'q4_k', 'q5_k', 'q6_k'];
  it('gives the bits the calling thread alone gives, on matrices of many chunks, call after call', async () => {
    const alone = new NativeDense({ threads: 1 });
    const rng = new Rng(9);
    const cases = DTYPES.map((dtype) => ({
      dtype,
      weight: randomWeight(rng, dtype, 3000, 512),
      x: randomF32(rng, 5 * 512),
    }));
    const expected = cases.map((c) => alone.matmulSync(alone.prepareSync(c.weight), c.x, 5));
    const helped = new NativeDense({ threads: 3, helperMinM: 1, spinMicros: 50 });
    const prepared = cases.map((c) => helped.prepareSync(c.weight));
    for (let round = 0; round < 20; round++)
      for (const [i, c] of cases.entries())
        expectBitwiseEqual(
          `${c.dtype} round ${round}`,
          helped.matmulSync(prepared[i]!, c.x, 5),
          expected[i]!,
          5 * 3000,
        );
    // And after the helpers have gone to sleep (past their spin), they still wake and agree.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expectBitwiseEqual('after sleeping', helped.matmulSync(prepared[0]!, cases[0]!.x, 5), expected[0]!, 5 * 3000);
  });
});
