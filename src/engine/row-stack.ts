// A weight matrix stacked from row groups of different dtypes (llama.cpp's Q4_K_M keeps q/k in
// Q4_K and some layers' v in Q6_K; gate in Q4_K, up in Q4_K): each group stays in its own dtype
// and is prepared by the dense backend on its own; one matmul runs each group and writes its
// output columns in place. Same-dtype stacks never come here (weights-prepared.ts stacks their
// bytes into one matrix). It must never widen a quantized weight.
import { assert } from '../core/index.js';
import type { DenseKernels, DenseWeight, WeightDType } from '../kernels/index.js';

export class RowStack implements DenseWeight {
  readonly rows: number;
  readonly cols: number;
  /** The first group's dtype (a DenseWeight has one; the groups keep their own). */
  readonly dtype: WeightDType;

  constructor(readonly parts: readonly DenseWeight[]) {
    assert(
      parts.length > 1 && parts.every((p) => p.cols === parts[0]!.cols),
      'RowStack: two or more groups with one column count',
    );
    this.rows = parts.reduce((a, p) => a + p.rows, 0);
    this.cols = parts[0]!.cols;
    this.dtype = parts[0]!.dtype;
  }
}

/** out[m, rows] = x[m, cols] · Wᵀ for a plain weight or a RowStack. */
export async function matmulRows(
  dense: DenseKernels,
  weight: DenseWeight,
  x: Float32Array,
  m: number,
  out: Float32Array,
): Promise<void> {
  if (!(weight instanceof RowStack)) {
    await dense.matmul(weight, x, m, out);
    return;
  }
  let column = 0;
  for (const part of weight.parts) {
    if (m === 1) {
      await dense.matmul(part, x, 1, out.subarray(column, column + part.rows));
    } else {
      const y = await dense.matmul(part, x, m);
      for (let i = 0; i < m; i++) out.set(y.subarray(i * part.rows, (i + 1) * part.rows), i * weight.rows + column);
    }
    column += part.rows;
  }
}
