// The batch-invariant dense matmul on WebAssembly SIMD (`--kernels wasm`; auto's where the native
// addon does not run). Weights are copied once into the runtime's memory and decoded on the fly
// inside the kernel: f32/f16/bf16 as in the file; q8_0/q4_0 repacked, still 8/4-bit, into a
// blocks array and an f32 scale array
//   [rows * cols/32 blocks of 32 int8 (q8_0) | 16 nibble bytes in GGML order (q4_0)] [scales]
// (+2 bytes per block over the file: f16 d widened to f32, so SIMD loads stay aligned and no
// f16 conversion sits in the inner loop). Each output row's value depends only on its input row
// (assembly/dense.ts fixes the reduction order), never on m, nor on how many threads share it:
// with `threads` > 1, large matmuls split their output rows over worker threads (workers.ts).
// K-quants: Q4_K and Q5_K run on the q4_0 / q8_0 kernels, still 4/8-bit (dense-k.ts: each
// sub-block of 32 as a block, w = s (q - z), plus a small f32 product of x's block sums with the
// min terms); Q6_K (sub-blocks of 16) is decoded to f32 at prepare: exact, 4x+ its memory.
import { assert, assertNever } from '../../core/index.js';
import { QK, Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, dequantize, f16ToF32 } from '../formats.js';
import { addCorrection, prepareK } from './dense-k.js';
import { checkMatmul, checkWeight } from '../layout.js';
import type { DenseKernels, DenseWeight, HostTensor, WeightDType } from '../types.js';
import { WasmRuntime, type WasmRuntimeOptions } from './runtime.js';
import { DenseWorkers, type MatmulArgs } from './workers.js';

/** Below this many multiply-adds a matmul stays on the calling thread (waking a worker costs ~10-50 µs). */
const MIN_PARALLEL_MACS = 1 << 18;

export interface WasmDenseOptions extends WasmRuntimeOptions {
  /** Share an existing runtime (and its memory) with WasmOps; default: load a new one. */
  readonly runtime?: WasmRuntime;
  /** Threads per matmul, the calling one included (default 1). */
  readonly threads?: number;
}

function kindOf(dtype: WeightDType): number {
  switch (dtype) {
    case 'f32':
      return 0;
    case 'f16':
      return 1;
    case 'bf16':
      return 2;
    case 'q8_0':
      return 3;
    case 'q4_0':
      return 4;
    case 'q4_k':
      return 4; // repacked as q4_0 blocks (dense-k.ts)
    case 'q5_k':
      return 3; // repacked as q8_0 blocks
    case 'q6_k':
      return 0; // decoded to f32 at prepare
    default:
      return assertNever(dtype, 'weight dtype');
  }
}

class WasmWeight implements DenseWeight {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly dtype: WeightDType,
    readonly ptr: number,
    /** f32 block scales (q8_0, q4_0, q4_k, q5_k only; 0 otherwise) */
    readonly scalesPtr: number,
    readonly runtime: WasmRuntime,
    /** q4_k, q5_k: f32 [rows, cols / 32] min-term correction (dense-k.ts); 0 otherwise */
    readonly correctionPtr = 0,
  ) {}
}

export class WasmDense implements DenseKernels {
  readonly name = 'wasm' as const;
  readonly batchInvariant = true;
  readonly runtime: WasmRuntime;
  readonly #workers: DenseWorkers | undefined;

  constructor(runtime: WasmRuntime, workers?: DenseWorkers) {
    this.runtime = runtime;
    this.#workers = workers;
  }

  async prepare(weight: HostTensor): Promise<DenseWeight> {
    const { rows, cols } = checkWeight(weight);
    const rt = this.runtime;
    if (weight.dtype === 'q6_k') {
      const ptr = rt.alloc(rows * cols * 4);
      dequantize(weight.dtype, weight.data, 0, rows * cols, rt.f32(ptr, rows * cols));
      return new WasmWeight(rows, cols, weight.dtype, ptr, 0, rt);
    }
    if (weight.dtype === 'q4_k' || weight.dtype === 'q5_k') {
      const k = prepareK(rt, weight.dtype, weight.data, rows, cols);
      return new WasmWeight(rows, cols, weight.dtype, k.ptr, k.scalesPtr, rt, k.correctionPtr);
    }
    if (weight.dtype !== 'q8_0' && weight.dtype !== 'q4_0') {
      const ptr = rt.alloc(weight.data.byteLength);
      rt.u8(ptr, weight.data.byteLength).set(weight.data);
      return new WasmWeight(rows, cols, weight.dtype, ptr, 0, rt);
    }
    const numBlocks = (rows * cols) / QK;
    const [blockBytes, payload] = weight.dtype === 'q8_0' ? [Q8_0_BLOCK_BYTES, 32] : [Q4_0_BLOCK_BYTES, 16];
    const ptr = rt.alloc(numBlocks * payload);
    const scalesPtr = rt.alloc(numBlocks * 4);
    const blocks = rt.u8(ptr, numBlocks * payload);
    const scales = rt.f32(scalesPtr, numBlocks);
    const src = weight.data;
    for (let b = 0; b < numBlocks; b++) {
      const at = b * blockBytes;
      scales[b] = f16ToF32(src[at]! | (src[at + 1]! << 8));
      blocks.set(src.subarray(at + 2, at + blockBytes), b * payload);
    }
    return new WasmWeight(rows, cols, weight.dtype, ptr, scalesPtr, rt);
  }

  async matmul(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Promise<Float32Array> {
    return this.matmulSync(weight, x, m, out);
  }

  /** matmul without the promise, for callers that run on the wasm memory directly. */
  matmulSync(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Float32Array {
    assert(
      weight instanceof WasmWeight && weight.runtime === this.runtime,
      'WasmDense.matmul: weight was not prepared by this WasmDense',
    );
    const { rows, cols } = weight;
    checkMatmul(rows, cols, x, m, out);
    const y = out ?? new Float32Array(m * rows);
    if (m === 0) return y;
    const rt = this.runtime;
    const xp = rt.input('dense-x', x, m * cols);
    const yp = rt.owns(y) ? y.byteOffset : rt.scratch('dense-y', m * rows * 4);
    const scratchBytes = 8 * cols * 4 + 64; // a few decoded weight rows
    const args = (r0: number, r1: number, scratch: number): MatmulArgs => [
      kindOf(weight.dtype),
      weight.ptr,
      weight.scalesPtr,
      xp,
      yp,
      m,
      rows,
      cols,
      r0,
      r1,
      scratch,
    ];
    const threads = this.#workers === undefined || m * rows * cols < MIN_PARALLEL_MACS ? 1 : this.#workers.count + 1;
    if (threads === 1) {
      rt.kernels.matmul(...args(0, rows, rt.scratch('dense-rows', scratchBytes)));
    } else {
      // Contiguous row ranges, multiples of 8 rows (whole tiles), the calling thread takes the first.
      const chunk = Math.ceil(rows / threads / 8) * 8;
      const jobs: MatmulArgs[] = [];
      for (let t = 1; t < threads && t * chunk < rows; t++)
        jobs.push(args(t * chunk, Math.min(rows, (t + 1) * chunk), rt.scratch(`dense-rows-${t}`, scratchBytes)));
      this.#workers!.run(jobs, () =>
        rt.kernels.matmul(...args(0, Math.min(rows, chunk), rt.scratch('dense-rows', scratchBytes))),
      );
    }
    if (weight.correctionPtr !== 0) addCorrection(rt, weight.correctionPtr, xp, yp, m, rows, cols);
    rt.output(yp, y, m * rows);
    return y;
  }

  async dispose(): Promise<void> {
    await this.#workers?.close();
  }
}

export async function createWasmDense(options: WasmDenseOptions = {}): Promise<WasmDense> {
  const runtime = options.runtime ?? (await WasmRuntime.load(options));
  const threads = options.threads ?? 1;
  assert(
    Number.isInteger(threads) && threads >= 1,
    () => `WasmDense: threads must be a positive integer, got ${threads}`,
  );
  return new WasmDense(runtime, threads > 1 ? await DenseWorkers.start(runtime, threads - 1) : undefined);
}
