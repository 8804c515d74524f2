// MXFP4 (GGML type 39), gpt-oss's expert weights, and its exact repack at load into a dtype the
// dense kernels run. Tessera has no MXFP4 matmul: each MXFP4 tensor is rewritten once, exactly,
// as q8_0 (34 bytes per 32 weights: twice MXFP4's 17), or bf16 where q8_0 cannot hold a block's
// scale; the repacked bytes are counted (RepackStats) so the loader can say how much. Pure: no I/O.
//
//   block (17 bytes, 32 weights):  u8 e (E8M0) | u8 qs[16]
//     w[j]      = kv[qs[j] & 15] * 2^(e - 128)       j < 16
//     w[j + 16] = kv[qs[j] >> 4] * 2^(e - 128)
//     kv = 2 × E2M1 = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
//   (llama.cpp's dequantize_row_mxfp4 with ggml_e8m0_to_fp32_half: kv doubled, the scale halved.)
//
// Why q8_0 is exact: kv are integers in [-12, 12] (int8), and 2^(e - 128) is an f16 exactly when
// e - 128 is in [-24, 15] (f16 subnormals reach 2^-24): then d = 2^(e - 128), qs = kv give the same
// products. A block whose codes are all zero is exact with any scale. Otherwise the tensor goes
// to bf16: each weight is at most two significant bits times a power of two in [2^-128, 2^127 · 12],
// inside bf16's range except e = 255 (NaN in OCP MX) or overflow, which are refused.
import { ModelLoadError } from '../core/index.js';
import { byteSize, f32ToBf16, f32ToF16, Float32Bits, QK } from '../kernels/index.js';
import type { HostTensor, WeightDType } from '../kernels/index.js';

export const MXFP4_GGML_TYPE = 39;
export const MXFP4_BLOCK_BYTES = 17;
/** kv: twice the E2M1 value of each 4-bit code. */
export const MXFP4_VALUES: readonly number[] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/** 2^(e - 128): ggml_e8m0_to_fp32_half. */
export function e8m0Half(e: number): number {
  return 2 ** (e - 128);
}

/** Bytes of `count` MXFP4 weights. */
export function mxfp4Bytes(count: number): number {
  if (count % QK !== 0) throw new RangeError(`mxfp4 needs a multiple of ${QK} weights, got ${count}`);
  return (count / QK) * MXFP4_BLOCK_BYTES;
}

/** The f32 values of `count` MXFP4 weights (the reference the repacks are checked against). */
export function dequantizeMxfp4(data: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  for (let b = 0; b < count / QK; b++) {
    const at = b * MXFP4_BLOCK_BYTES;
    const d = e8m0Half(data[at]!);
    for (let j = 0; j < QK / 2; j++) {
      const byte = data[at + 1 + j]!;
      out[b * QK + j] = MXFP4_VALUES[byte & 15]! * d;
      out[b * QK + j + QK / 2] = MXFP4_VALUES[byte >> 4]! * d;
    }
  }
  return out;
}

/** llama.cpp's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127, each weight its nearest code (the lower on a tie). */
export function quantizeMxfp4(values: Float32Array): Uint8Array {
  const out = new Uint8Array(mxfp4Bytes(values.length));
  for (let b = 0; b < values.length / QK; b++) {
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(values[b * QK + j]!));
    const e = amax > 0 ? (Math.floor(Math.log2(Math.fround(amax))) - 2 + 127) & 0xff : 0;
    const d = e8m0Half(e);
    const at = b * MXFP4_BLOCK_BYTES;
    out[at] = e;
    for (let j = 0; j < QK / 2; j++)
      out[at + 1 + j] = nearestCode(values[b * QK + j]!, d) | (nearestCode(values[b * QK + QK / 2 + j]!, d) << 4);
  }
  return out;
}

function nearestCode(x: number, d: number): number {
  let best = 0;
  let bestErr = Math.abs(Math.fround(MXFP4_VALUES[0]! * d) - x);
  for (let i = 1; i < 16; i++) {
    const err = Math.abs(Math.fround(MXFP4_VALUES[i]! * d) - x);
    if (err < bestErr) {
      best = i;
      bestErr = err;
    }
  }
  return best;
}

/** What the repacks wrote, for the loader's one line. */
export interface RepackStats {
  tensors: number;
  /** MXFP4 bytes read. */
  mxfp4Bytes: number;
  /** Bytes written in their place (q8_0: 2x, bf16: ~3.8x). */
  repackedBytes: number;
  /** Tensors that went to bf16 (a block's scale outside f16). */
  bf16Tensors: number;
}

export function emptyRepackStats(): RepackStats {
  return { tensors: 0, mxfp4Bytes: 0, repackedBytes: 0, bf16Tensors: 0 };
}

/** True when every block's scale is an f16 or its codes are all zero: the q8_0 repack is exact. */
export function fitsQ8_0(data: Uint8Array, count: number): boolean {
  for (let b = 0; b < count / QK; b++) {
    const at = b * MXFP4_BLOCK_BYTES;
    const e = data[at]!;
    if (e >= 104 && e <= 143) continue;
    for (let j = 0; j < QK / 2; j++) if ((data[at + 1 + j]! & 0x77) !== 0) return false; // a nonzero code (8 is -0)
  }
  return true;
}

/**
 * The MXFP4 tensor `name` of `shape` as a q8_0 (or, failing that, bf16) HostTensor holding exactly its
 * values; counted in `stats`. A block with scale byte 255 (NaN) is a ModelLoadError naming `file`.
 */
export function repackMxfp4(
  name: string,
  shape: readonly number[],
  data: Uint8Array,
  stats: RepackStats,
  file: string,
): HostTensor {
  const count = shape.reduce((a, b) => a * b, 1);
  if (data.byteLength !== mxfp4Bytes(count))
    throw new ModelLoadError(file, `tensor ${name}: ${data.byteLength} bytes for ${count} MXFP4 weights`);
  for (let b = 0; b < count / QK; b++)
    if (data[b * MXFP4_BLOCK_BYTES] === 255) throw new ModelLoadError(file, `tensor ${name}: an MXFP4 scale is NaN`);
  const dtype: WeightDType = fitsQ8_0(data, count) ? 'q8_0' : 'bf16';
  const out = new Uint8Array(byteSize(dtype, count));
  if (dtype === 'q8_0') {
    for (let b = 0; b < count / QK; b++) {
      const at = b * MXFP4_BLOCK_BYTES;
      const to = b * 34;
      const e = data[at]!;
      const h = e >= 104 && e <= 143 ? f32ToF16(e8m0Half(e)) : 0; // outside: every code zero
      out[to] = h & 0xff;
      out[to + 1] = h >> 8;
      for (let j = 0; j < QK / 2; j++) {
        const byte = data[at + 1 + j]!;
        out[to + 2 + j] = MXFP4_VALUES[byte & 15]! & 0xff;
        out[to + 2 + j + QK / 2] = MXFP4_VALUES[byte >> 4]! & 0xff;
      }
    }
  } else {
    const values = dequantizeMxfp4(data, count);
    const bits = new Float32Bits();
    const view = new DataView(out.buffer);
    for (let i = 0; i < count; i++) {
      if (!Number.isFinite(values[i]!)) throw new ModelLoadError(file, `tensor ${name}: an MXFP4 weight overflows`);
      view.setUint16(i * 2, f32ToBf16(values[i]!, bits), true);
    }
    stats.bf16Tensors++;
  }
  stats.tensors++;
  stats.mxfp4Bytes += data.byteLength;
  stats.repackedBytes += out.byteLength;
  return { name, dtype, shape, data: out };
}
