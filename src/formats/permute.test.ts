import { describe, expect, it } from 'vitest';
import { Rng } from '../core/index.js';
import { quantize, type HostTensor } from '../kernels/index.js';
import { permuteRopeRows } from './permute.js';

/** A [rows, cols] f32 tensor whose row r holds r in every column. */
function rowIds(rows: number, cols: number): HostTensor {
  const values = Float32Array.from({ length: rows * cols }, (_, i) => Math.floor(i / cols));
  return { name: 'w', dtype: 'f32', shape: [rows, cols], data: quantize('f32', values) };
}

const rowsOf = (t: HostTensor, cols: number): number[] => {
  const v = new Float32Array(t.data.slice().buffer);
  return Array.from({ length: t.shape[0]! }, (_, r) => v[r * cols]!);
};

describe('permuteRopeRows', () => {
  it('interleaves the two halves of each head, as llama.cpp converter does (headDim 4, 2 heads)', () => {
    // HF head rows [x0 x1 | y0 y1] -> GGUF [x0 y0 x1 y1]
    const gguf = permuteRopeRows(rowIds(8, 2), 2, 'hf-to-gguf');
    expect(rowsOf(gguf, 2)).toEqual([0, 2, 1, 3, 4, 6, 5, 7]);
    expect(rowsOf(permuteRopeRows(gguf, 2, 'gguf-to-hf'), 2)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it('is undone exactly by the inverse for larger heads and 1-D biases', () => {
    const t = rowIds(3 * 16, 5);
    expect(permuteRopeRows(permuteRopeRows(t, 3, 'hf-to-gguf'), 3, 'gguf-to-hf').data).toEqual(t.data);
    const bias = rowIds(16, 1);
    const b = { ...bias, shape: [16] };
    expect(rowsOf(permuteRopeRows(b, 2, 'hf-to-gguf'), 1)).toEqual([
      0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15,
    ]);
  });

  it('moves q4_0 and q8_0 rows whole: permuting then quantizing equals quantizing then permuting', () => {
    const rng = new Rng(3);
    const values = Float32Array.from({ length: 8 * 64 }, () => rng.normal());
    const f32: HostTensor = { name: 'w', dtype: 'f32', shape: [8, 64], data: quantize('f32', values) };
    for (const dtype of ['q4_0', 'q8_0'] as const) {
      const permuted = permuteRopeRows(f32, 2, 'hf-to-gguf');
      const thenQuantized = quantize(dtype, new Float32Array(permuted.data.buffer));
      const quantizedFirst = permuteRopeRows({ ...f32, dtype, data: quantize(dtype, values) }, 2, 'hf-to-gguf');
      expect(quantizedFirst.data).toEqual(thenQuantized);
    }
  });
});
