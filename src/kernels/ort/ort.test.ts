import { afterAll, describe, expect, it } from 'vitest';
import { Rng } from '../../core/index.js';
import { denseCases } from '../cases/dense-cases.js';
import { randomF32, randomWeight } from '../cases/support.js';
import { OrtDense } from './dense.js';
import { repackQ4_0, repackQ8_0 } from './repack.js';

// int8 activations: per-block int8 rounding of x costs up to ~0.4% per element; measured
// ~1.4e-3 of Σ|x·w| at 768 columns. 1e-2 keeps headroom yet fails any wrong nibble or scale.
const INT8_ACTIVATION_TOLERANCE = 1e-2;

const exact = new OrtDense({ threads: 1, activationPrecision: 'f32' });
const int8 = new OrtDense({ threads: 2, activationPrecision: 'int8' });
afterAll(async () => {
  await exact.dispose();
  await int8.dispose();
});

describe('OrtDense (f32 activations) runs the dense case suite', () => {
  for (const c of denseCases()) it(c.name, () => c.run(exact));
});

describe('OrtDense (int8 activations for block weights) runs the dense case suite', () => {
  for (const c of denseCases({ blockTolerance: INT8_ACTIVATION_TOLERANCE })) it(c.name, () => c.run(int8));
});

describe('MatMulNBits repacking', () => {
  it('puts q4_0 element 2i in the low and 2i+1 in the high nibble of byte i, with the f16 scale widened', () => {
    // One block: d = 1.0 (f16 0x3c00), element j has nibble j % 16 (low nibbles 0..15, high nibbles 0..15).
    const block = Uint8Array.from([0x00, 0x3c, ...Array.from({ length: 16 }, (_, j) => j | (j << 4))]);
    const packed = repackQ4_0(block, 1, 32);
    expect(packed.scales[0]).toBe(1);
    expect(packed.blocks[0]).toBe(0 | (1 << 4)); // elements 0 and 1
    expect(packed.blocks[8]).toBe(0 | (1 << 4)); // elements 16 and 17: nibbles 0 and 1 again
    expect(packed.blocks[7]).toBe(14 | (15 << 4)); // elements 14 and 15
  });

  it('stores q8_0 int8 values as uint8 with zero point 128', () => {
    const block = Uint8Array.from([0x00, 0x40, 0x80, 0x7f, 0xff, 0x00, ...Array(28).fill(0)]); // d = 2, q = -128, 127, -1, 0
    const packed = repackQ8_0(block, 1, 32);
    expect(packed.scales[0]).toBe(2);
    expect([...packed.blocks.subarray(0, 4)]).toEqual([0, 255, 127, 128]);
  });

  it('refuses a weight prepared by another OrtDense', async () => {
    const weight = await exact.prepare(randomWeight(new Rng(1), 'f32', 4, 8));
    await expect(int8.matmul(weight, randomF32(new Rng(2), 8), 1)).rejects.toThrow(/not prepared by this OrtDense/);
  });
});
