// The reference dense matmul: y = x · Wᵀ in plain TypeScript, the oracle every fast dense
// backend is tested against. Weights stay in their file format (quantized stays quantized);
// one row at a time is decoded with formats.ts's exact `dequantize`, and each dot product is
// accumulated in f64 and rounded once to f32. Readable first; never tuned for speed.
import { assert } from '../../core/index.js';
import { dequantize } from '../formats.js';
import { checkMatmul, checkWeight } from '../layout.js';
import type { DenseKernels, DenseWeight, HostTensor, WeightDType } from '../types.js';

class RefWeight implements DenseWeight {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly dtype: WeightDType,
    readonly data: Uint8Array,
  ) {}
}

export class RefDense implements DenseKernels {
  readonly name = 'ref' as const;
  readonly batchInvariant = true;

  async prepare(weight: HostTensor): Promise<DenseWeight> {
    const { rows, cols } = checkWeight(weight);
    return new RefWeight(rows, cols, weight.dtype, weight.data.slice());
  }

  async matmul(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Promise<Float32Array> {
    assert(weight instanceof RefWeight, 'RefDense.matmul: weight was not prepared by RefDense');
    const { rows, cols } = weight;
    checkMatmul(rows, cols, x, m, out);
    const y = out ?? new Float32Array(m * rows);
    const row = new Float32Array(cols);
    for (let r = 0; r < rows; r++) {
      dequantize(weight.dtype, weight.data, r * cols, cols, row);
      for (let i = 0; i < m; i++) {
        let sum = 0;
        for (let j = 0; j < cols; j++) sum += x[i * cols + j]! * row[j]!;
        y[i * rows + r] = sum;
      }
    }
    return y;
  }

  async dispose(): Promise<void> {}
}

export function createRefDense(): DenseKernels {
  return new RefDense();
}
