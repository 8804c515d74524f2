import { beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../core/index.js';
import { batchInvarianceCases, denseCases } from '../cases/dense-cases.js';
import { expectBitwiseEqual, randomF32, randomWeight } from '../cases/support.js';
import type { WeightDType } from '../types.js';
import { NativeDense, nativeAvailability, nativeVariantsHere, selectNativeVariant } from './native.js';

// Activations quantized (rounded, for f16/bf16) as llama.cpp does: the suite compares with the
// reference run on those activations, at the float tolerance (dense-cases.ts).
const AS_LLAMA_CPP = { activations: 'llama.cpp' } as const;

const DTYPES: readonly WeightDType[] = ['f32', 'f16', 'bf16', 'q4_0', 'q8_0', 'q4_k', 'q5_k', 'q6_k'];

describe('the native addon', () => {
  it('is built and usable on this machine (CI builds it with gcc)', () => {
    const found = nativeAvailability();
    expect('why' in found ? found.why : 'ok').toBe('ok');
  });
});

// Every variant this CPU runs (AVX-512 VNNI, AVX2) runs the suite: the variant is one per process
// (selectNativeVariant), so each describe selects its own before its tests, which run in order.
const VARIANTS = nativeVariantsHere();

describe("the addon's variants", () => {
  it('are chosen by CPUID, and a forced one sticks until another is chosen', () => {
    const [best] = VARIANTS;
    expect(selectNativeVariant('auto')).toBe(best);
    for (const v of VARIANTS) expect(selectNativeVariant(v)).toBe(v);
    expect(selectNativeVariant('auto')).toBe(best);
  });
});

for (const variant of VARIANTS)
  describe(`NativeDense ${variant} (the calling thread alone) runs the dense case suite`, () => {
    let native: NativeDense;
    beforeAll(() => {
      selectNativeVariant(variant);
      native = new NativeDense({ threads: 1 });
    });
    for (const c of denseCases(AS_LLAMA_CPP)) it(c.name, () => c.run(native));
    for (const c of batchInvarianceCases()) it(c.name, () => c.run(native));

    // dense-avx512.c splits m x rows into tiles of up to 8 (17: 6, 6, 5) and takes rows longer than
    // a tile's L1 share in slabs of super-blocks (3072 columns at 8 x rows, 8448 at 2).
    it('block dtypes, long rows: each x row alone equals the same row in batches of 2, 16 and 17, bit for bit', () => {
      const rng = new Rng(300);
      for (const dtype of ['q4_0', 'q8_0', 'q4_k', 'q5_k', 'q6_k'] as const)
        for (const cols of [3072, 8448]) {
          const rows = 41;
          const weight = native.prepareSync(randomWeight(rng, dtype, rows, cols));
          const x = randomF32(rng, 17 * cols);
          const alone = Array.from({ length: 17 }, (_, i) =>
            native.matmulSync(weight, x.subarray(i * cols, (i + 1) * cols), 1),
          );
          for (const m of [2, 16, 17]) {
            const batch = native.matmulSync(weight, x.subarray(0, m * cols), m);
            for (let i = 0; i < m; i++)
              expectBitwiseEqual(`${dtype} ${cols} m=${m} row ${i}`, alone[i]!, batch.subarray(i * rows), rows);
          }
        }
    });
  });

describe('NativeDense', () => {
  let native: NativeDense;
  beforeAll(() => {
    selectNativeVariant('auto');
    native = new NativeDense({ threads: 1 });
  });
  it('refuses a weight prepared by another NativeDense', async () => {
    const weight = await new NativeDense().prepare(randomWeight(new Rng(1), 'q4_0', 4, 64));
    await expect(native.matmul(weight, randomF32(new Rng(2), 64), 1)).rejects.toThrow(
      /not prepared by this NativeDense/,
    );
  });
});

// The helper threads do not depend on the variant (each chunk is the variant's computeRows): the
// best one alone keeps the file lean.
for (const variant of VARIANTS.slice(0, 1))
  describe(`NativeDense ${variant} with helper threads sharing every call`, () => {
    let threaded: NativeDense;
    beforeAll(() => {
      selectNativeVariant(variant);
      threaded = new NativeDense({ threads: 3, helperMinM: 1, spinMicros: 50 });
    });
    for (const c of denseCases(AS_LLAMA_CPP)) it(c.name, () => c.run(threaded));

    it('gives the bits the calling thread alone gives, on matrices of many chunks, call after call', async () => {
      const alone = new NativeDense({ threads: 1 });
      const rng = new Rng(9);
      // m = 5, and m = 37: its x rows quantized (rounded) by the helpers too (dense.c's prepareJob).
      const cases = DTYPES.flatMap((dtype) =>
        [5, 37].map((m) => ({ dtype, m, weight: randomWeight(rng, dtype, 3000, 512), x: randomF32(rng, m * 512) })),
      );
      const expected = cases.map((c) => alone.matmulSync(alone.prepareSync(c.weight), c.x, c.m));
      const helped = new NativeDense({ threads: 3, helperMinM: 1, spinMicros: 50 });
      const prepared = cases.map((c) => helped.prepareSync(c.weight));
      for (let round = 0; round < 20; round++)
        for (const [i, c] of cases.entries())
          if (c.m === 5 || round < 3)
            expectBitwiseEqual(
              `${c.dtype} m=${c.m} round ${round}`,
              helped.matmulSync(prepared[i]!, c.x, c.m),
              expected[i]!,
              c.m * 3000,
            );
      // And after the helpers have gone to sleep (past their spin), they still wake and agree.
      await new Promise((resolve) => setTimeout(resolve, 20));
      expectBitwiseEqual('after sleeping', helped.matmulSync(prepared[0]!, cases[0]!.x, 5), expected[0]!, 5 * 3000);
    });
  });

describe('the variants agree', () => {
  // Same integer block sums (the same activation quantization), float sums in another order.
  it('on every dtype, to float rounding', () => {
    if (VARIANTS.length < 2) return;
    const rng = new Rng(11);
    for (const dtype of DTYPES) {
      const weight = randomWeight(rng, dtype, 67, 512);
      const x = randomF32(rng, 3 * 512);
      const outs = VARIANTS.map((v) => {
        selectNativeVariant(v);
        const d = new NativeDense({ threads: 1 });
        return d.matmulSync(d.prepareSync(weight), x, 3);
      });
      selectNativeVariant('auto');
      const scale = Math.max(...outs[0]!.map(Math.abs));
      for (let i = 0; i < outs[0]!.length; i++)
        expect(Math.abs(outs[0]![i]! - outs[1]![i]!), `${dtype} [${i}]`).toBeLessThanOrEqual(1e-5 * scale);
    }
  });
});
