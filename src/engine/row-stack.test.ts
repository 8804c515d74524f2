import { describe, expect, it } from 'vitest';
import { Rng } from '../core/index.js';
import { createRefDense, dequantize, quantize, type HostTensor, type WeightDType } from '../kernels/index.js';
import { matmulRows, RowStack } from './row-stack.js';

function weight(rng: Rng, dtype: WeightDType, rows: number, cols: number): HostTensor {
  const values = Float32Array.from({ length: rows * cols }, () => rng.normal());
  return { name: dtype, dtype, shape: [rows, cols], data: quantize(dtype, values) };
}

describe('RowStack: row groups of different dtypes, one matmul', () => {
  it.each([1, 3])('equals one f32 matrix of the same rows at m = %i, each group kept in its dtype', async (m) => {
    const rng = new Rng(9);
    const parts = [weight(rng, 'q4_k', 8, 256), weight(rng, 'q6_k', 4, 256), weight(rng, 'q5_k', 3, 256)];
    const dense = createRefDense();
    const stack = new RowStack(await Promise.all(parts.map((p) => dense.prepare(p))));
    expect(stack.parts.map((p) => p.dtype)).toEqual(['q4_k', 'q6_k', 'q5_k']);
    const f32 = new Float32Array(15 * 256);
    let at = 0;
    for (const p of parts) {
      dequantize(p.dtype, p.data, 0, p.shape[0]! * 256, f32.subarray(at));
      at += p.shape[0]! * 256;
    }
    const whole = await dense.prepare({
      name: 'f32',
      dtype: 'f32',
      shape: [15, 256],
      data: new Uint8Array(f32.buffer),
    });
    const x = Float32Array.from({ length: m * 256 }, () => rng.normal());
    const out = new Float32Array(m * 15);
    await matmulRows(dense, stack, x, m, out);
    expect([...out]).toEqual([...(await dense.matmul(whole, x, m))]);
  });
});
