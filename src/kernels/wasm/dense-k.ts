// Q4_K and Q5_K on WasmDense's q4_0 / q8_0 block kernels. A K-quant sub-block of 32 computes
// w = s q - m (kquants.ts); the block kernels compute w = d (q' - z), z = 8 (q4_0, nibbles) or
// 0 (q8_0, int8). With d = s and q' = q (Q4_K) or q' = q - 16 (Q5_K, fits int8):
//   w = s (q' - z) + (z' s - m),  z' = 8 (Q4_K) or 16 (Q5_K)
// so y = blockKernel(x) + blockSums(x) · Cᵀ, C[r, b] = z' s - m, an f32 product 32x smaller,
// run with the f32 kernel. Every step is per row and in a fixed order: batch-invariant still.
import { QK_K, decodeKBlock, newKBlock } from '../kquants.js';
import type { WasmRuntime } from './runtime.js';

export interface PreparedK {
  readonly ptr: number;
  readonly scalesPtr: number;
  readonly correctionPtr: number;
}

export function prepareK(
  rt: WasmRuntime,
  dtype: 'q4_k' | 'q5_k',
  data: Uint8Array,
  rows: number,
  cols: number,
): PreparedK {
  const numBlocks = (rows * cols) / 32;
  const four = dtype === 'q4_k';
  const payload = four ? 16 : 32;
  const ptr = rt.alloc(numBlocks * payload);
  const scalesPtr = rt.alloc(numBlocks * 4);
  const correctionPtr = rt.alloc(numBlocks * 4);
  const blocks = rt.u8(ptr, numBlocks * payload);
  const scales = rt.f32(scalesPtr, numBlocks);
  const correction = rt.f32(correctionPtr, numBlocks);
  const blk = newKBlock();
  const shift = four ? 8 : 16;
  for (let b = 0; b < (rows * cols) / QK_K; b++) {
    decodeKBlock(dtype, data, b, blk);
    for (let j = 0; j < 8; j++) {
      const at = (b * 8 + j) * payload;
      scales[b * 8 + j] = blk.scales[j]!;
      correction[b * 8 + j] = Math.fround(shift * blk.scales[j]! - blk.mins[j]!);
      const q = blk.q.subarray(j * 32, j * 32 + 32);
      // q4_0's GGML order: byte i holds weight i (low nibble) and weight i + 16 (high nibble).
      if (four) for (let i = 0; i < 16; i++) blocks[at + i] = q[i]! | (q[i + 16]! << 4);
      else for (let i = 0; i < 32; i++) blocks[at + i] = (q[i]! - 16) & 0xff;
    }
  }
  return { ptr, scalesPtr, correctionPtr };
}

/** y[m, rows] += blockSums(x)[m, cols/32] · Cᵀ, with y at yp and x at xp in the runtime's memory. */
export function addCorrection(
  rt: WasmRuntime,
  correctionPtr: number,
  xp: number,
  yp: number,
  m: number,
  rows: number,
  cols: number,
): void {
  const nb = cols / 32;
  const sumsPtr = rt.scratch('dense-k-sums', m * nb * 4);
  const outPtr = rt.scratch('dense-k-out', m * rows * 4);
  const scratch = rt.scratch('dense-k-rows', 8 * nb * 4 + 64);
  const xs = rt.f32(xp, m * cols);
  const sums = rt.f32(sumsPtr, m * nb);
  for (let i = 0; i < m * nb; i++) {
    let s = 0;
    for (let j = i * 32; j < i * 32 + 32; j++) s += xs[j]!;
    sums[i] = s;
  }
  rt.kernels.matmul(0, correctionPtr, 0, sumsPtr, outPtr, m, rows, nb, 0, rows, scratch);
  const y = rt.f32(yp, m * rows);
  const extra = rt.f32(outPtr, m * rows);
  for (let i = 0; i < m * rows; i++) y[i] = y[i]! + extra[i]!;
}
