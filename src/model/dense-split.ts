// A DenseKernels that sends each weight to one of two backends of the same kind by its size in
// bytes: small matrices to a single-threaded instance, large ones to a multi-threaded one.
// Why: onnxruntime wakes its (non-spinning) intra-op threads on every call, which costs more than
// it saves on a matrix of a few hundred KB at decode's m = 1 (q4_0 m100 layers: measured +15-25%
// decode tokens/s at batch 1 with 1 thread below 1 MiB, no loss at batch 16). It must never
// change a result's arithmetic beyond what each backend does alone.
import { assert } from '../core/index.js';
import { byteSize, type DenseKernels, type DenseWeight, type HostTensor, type WeightDType } from '../kernels/index.js';

export class SizeSplitDense implements DenseKernels {
  readonly name: DenseKernels['name'];
  readonly batchInvariant: boolean;
  readonly #small: DenseKernels;
  readonly #large: DenseKernels;
  readonly #maxSmallBytes: number;
  readonly #owner = new WeakMap<DenseWeight, DenseKernels>();

  constructor(small: DenseKernels, large: DenseKernels, maxSmallBytes: number) {
    assert(small.name === large.name, 'SizeSplitDense: both backends must be of one kind');
    this.name = large.name;
    this.batchInvariant = small.batchInvariant && large.batchInvariant;
    this.#small = small;
    this.#large = large;
    this.#maxSmallBytes = maxSmallBytes;
  }

  async prepare(weight: HostTensor): Promise<DenseWeight> {
    const bytes = byteSize(
      weight.dtype,
      weight.shape.reduce((a, b) => a * b, 1),
    );
    const backend = bytes <= this.#maxSmallBytes ? this.#small : this.#large;
    const prepared = await backend.prepare(weight);
    this.#owner.set(prepared, backend);
    return prepared;
  }

  matmul(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Promise<Float32Array> {
    const backend = this.#owner.get(weight);
    assert(backend !== undefined, 'SizeSplitDense.matmul: weight was not prepared here');
    return backend.matmul(weight, x, m, out);
  }

  async dispose(): Promise<void> {
    await Promise.all([this.#small.dispose(), this.#large.dispose()]);
  }
}

/**
 * A DenseKernels that runs small batches (m <= maxSmallM) on one backend and larger ones on
 * another, per dtype. A weight is prepared on each backend that can run it, so a dtype split
 * between the two keeps two copies; one whose every batch goes to `small` (maxSmallM Infinity)
 * or to `large` (0) keeps one. Why: the native kernels (kernels/native) beat onnxruntime at every
 * m for f32 and block weights on this project's machines, but onnxruntime's GEMM wins for f16 /
 * bf16 at prefill's hundreds of rows (engine.ts's nativeMaxM). A row's result may differ between
 * the two (not batch-invariant); --deterministic never uses it.
 */
export class BatchSplitDense implements DenseKernels {
  readonly name: DenseKernels['name'];
  readonly batchInvariant = false;
  readonly #small: DenseKernels;
  readonly #large: DenseKernels;
  readonly #maxSmallM: (dtype: WeightDType) => number;
  readonly #pairs = new WeakMap<
    DenseWeight,
    { small: DenseWeight | null; large: DenseWeight | null; maxSmallM: number }
  >();

  /**
   * maxSmallM(dtype): the largest m run on `small` for weights of that dtype (0: never, then not
   * prepared there; Infinity: always, then not prepared on `large`).
   */
  constructor(small: DenseKernels, large: DenseKernels, maxSmallM: (dtype: WeightDType) => number) {
    this.name = small.name;
    this.#small = small;
    this.#large = large;
    this.#maxSmallM = maxSmallM;
  }

  async prepare(weight: HostTensor): Promise<DenseWeight> {
    const maxSmallM = this.#maxSmallM(weight.dtype);
    assert(
      maxSmallM === Infinity || (Number.isInteger(maxSmallM) && maxSmallM >= 0),
      'BatchSplitDense: maxSmallM must be an integer >= 0 or Infinity',
    );
    const small = maxSmallM > 0 ? await this.#small.prepare(weight) : null;
    const large = maxSmallM === Infinity ? null : await this.#large.prepare(weight);
    const either = (small ?? large)!;
    const handle: DenseWeight = { rows: either.rows, cols: either.cols, dtype: either.dtype };
    this.#pairs.set(handle, { small, large, maxSmallM });
    return handle;
  }

  matmul(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Promise<Float32Array> {
    const pair = this.#pairs.get(weight);
    assert(pair !== undefined, 'BatchSplitDense.matmul: weight was not prepared here');
    if (pair.small !== null && m <= pair.maxSmallM) return this.#small.matmul(pair.small, x, m, out);
    assert(
      pair.large !== null,
      'BatchSplitDense.matmul: unreachable (a weight with no large copy runs every m on small)',
    );
    return this.#large.matmul(pair.large, x, m, out);
  }

  async dispose(): Promise<void> {
    await Promise.all([this.#small.dispose(), this.#large.dispose()]);
  }
}
