// The q8_0 KV row: quantizing one token's K (or V) row into a q8_0 pool and reading values back.
// The layout is core/kv-view.ts's Q8_0 LAYOUT (llama.cpp's block_q8_0 per 32 values of a head,
// a head's last block cut short when headDim is not a multiple of 32). Every backend writes a
// q8_0 pool through quantizeKvRow, so the bytes are the same whichever kernels run (and the same
// as llama.cpp's quantize_row_q8_0_ref for a full block; wasm/assembly/kv-q8.ts is its twin, for
// speed, tested byte for byte against it). Must never: allocate per call, or read
// or write outside the row it is given.
import { Q8_BLOCK, Q8_BLOCK_BYTES, kvHeadBytes } from '../core/index.js';
import { Float32Bits, f16ToF32, f32ToF16 } from './half.js';

/** The f16 scale a block holding a nan or an infinity stores: every value of it reads back nan. */
export const Q8_NAN_SCALE = 0x7e00;

/** Round half away from zero (C's roundf), as llama.cpp's quantizer does. */
function roundAway(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x);
}

/**
 * Quantize numKvHeads * headDim f32 values src[srcAt..] into one q8_0 row at dst[dstAt..]
 * (numKvHeads * kvHeadBytes('q8_0', headDim) bytes): per block d = max|x| / 127 (f32), qs =
 * roundf(x * (1 / d)), d stored as f16; a non-finite value makes the block's d a nan.
 */
export function quantizeKvRow(
  src: Float32Array,
  srcAt: number,
  numKvHeads: number,
  headDim: number,
  dst: Uint8Array,
  dstAt: number,
  bits: Float32Bits,
): void {
  const headBytes = kvHeadBytes('q8_0', headDim);
  for (let h = 0; h < numKvHeads; h++) {
    const x0 = srcAt + h * headDim;
    const o0 = dstAt + h * headBytes;
    for (let b = 0; b * Q8_BLOCK < headDim; b++) {
      const n = Math.min(Q8_BLOCK, headDim - b * Q8_BLOCK);
      const x = x0 + b * Q8_BLOCK;
      const o = o0 + b * Q8_BLOCK_BYTES;
      let amax = 0;
      let finite = true;
      for (let i = 0; i < n; i++) {
        const v = src[x + i]!;
        if (!Number.isFinite(v)) finite = false;
        else amax = Math.max(amax, Math.abs(v));
      }
      if (!finite) {
        dst[o] = Q8_NAN_SCALE & 0xff;
        dst[o + 1] = Q8_NAN_SCALE >>> 8;
        dst.fill(0, o + 2, o + 2 + n);
        continue;
      }
      const d = Math.fround(amax / 127);
      const id = d === 0 ? 0 : Math.fround(1 / d);
      const half = f32ToF16(d, bits);
      dst[o] = half & 0xff;
      dst[o + 1] = half >>> 8;
      // (When 1 / d overflows, max|x| < ~4e-37, the inf or nan products store 0, as wasm's twin does.)
      for (let i = 0; i < n; i++) dst[o + 2 + i] = roundAway(Math.fround(src[x + i]! * id)) & 0xff;
    }
  }
}

/** Value i (< headDim) of KV head h of the q8_0 row at data[rowAt..]: d(block) * qs, exactly (an f32 product). */
export function q8KvValue(data: Uint8Array, rowAt: number, headDim: number, h: number, i: number): number {
  const block = rowAt + h * kvHeadBytes('q8_0', headDim) + (i >> 5) * Q8_BLOCK_BYTES;
  const d = f16ToF32(data[block]! | (data[block + 1]! << 8));
  const q = (data[block + 2 + (i & 31)]! << 24) >> 24;
  return Math.fround(d * q);
}

/** The q8_0 row at data[rowAt..] as numKvHeads * headDim f32 values into out[outAt..]. */
export function dequantizeKvRow(
  data: Uint8Array,
  rowAt: number,
  numKvHeads: number,
  headDim: number,
  out: Float32Array,
  outAt: number,
): void {
  for (let h = 0; h < numKvHeads; h++)
    for (let i = 0; i < headDim; i++) out[outAt + h * headDim + i] = q8KvValue(data, rowAt, headDim, h, i);
}
