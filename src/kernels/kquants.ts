// GGML's K-quants Q4_K, Q5_K and Q6_K (ggml-common.h): 256-weight super-blocks, each split into
// sub-blocks with their own scale. One decoder (`decodeKBlock`) turns a super-block into integer
// quants and per-sub-block f32 scales and mins; exact dequantization and every backend's repack
// use it, so the byte layout lives here only. Quantizers are for gen-model (any valid encoding
// loads in llama.cpp; they need not be ggml's own search). It must never do I/O.
//
//   Q4_K (144 bytes): f16 d | f16 dmin | scales[12] | qs[128]
//   Q5_K (176 bytes): f16 d | f16 dmin | scales[12] | qh[32] | qs[128]
//     8 sub-blocks of 32: w = (d * sc[j]) * q - (dmin * m[j]),  sc, m 6-bit (get_scale_min_k4)
//     qs: 64 weights per 32 bytes: sub-block 2c in the low nibbles, 2c+1 in the high nibbles
//     Q5_K: bit 4 of weight l of sub-block j is bit j of qh[l]
//   Q6_K (210 bytes): ql[128] | qh[64] | int8 scales[16] | f16 d
//     16 sub-blocks of 16: w = (d * sc[j]) * (q - 32), q 6-bit (4 low bits in ql, 2 high in qh)
import { assert } from '../core/index.js';
import { f16ToF32, f32ToF16, Float32Bits } from './half.js';

export const QK_K = 256;
export type KQuant = 'q4_k' | 'q5_k' | 'q6_k';
export const K_BLOCK_BYTES: Readonly<Record<KQuant, number>> = { q4_k: 144, q5_k: 176, q6_k: 210 };
/** Weights per sub-block (one scale, one min). */
export const K_SUB_BLOCK: Readonly<Record<KQuant, number>> = { q4_k: 32, q5_k: 32, q6_k: 16 };

export function isKQuant(dtype: string): dtype is KQuant {
  return dtype === 'q4_k' || dtype === 'q5_k' || dtype === 'q6_k';
}

/** One super-block decoded: q[256] in weight order, and per sub-block scale and min (w = scale * q - min). */
export interface KBlock {
  readonly q: Int32Array;
  readonly scales: Float32Array;
  /** Zero for Q6_K, whose offset (32) is taken out of q instead. */
  readonly mins: Float32Array;
}

export function newKBlock(): KBlock {
  return { q: new Int32Array(QK_K), scales: new Float32Array(16), mins: new Float32Array(16) };
}

function scaleMin(j: number, s: Uint8Array, at: number): [number, number] {
  if (j < 4) return [s[at + j]! & 63, s[at + j + 4]! & 63];
  return [(s[at + j + 4]! & 0xf) | ((s[at + j - 4]! >> 6) << 4), (s[at + j + 4]! >> 4) | ((s[at + j]! >> 6) << 4)];
}

const f16At = (data: Uint8Array, at: number): number => f16ToF32(data[at]! | (data[at + 1]! << 8));

/** Decode super-block `block` of `data` into `out` (its scales are f32 products, exact as in ggml). */
export function decodeKBlock(dtype: KQuant, data: Uint8Array, block: number, out: KBlock): void {
  const at = block * K_BLOCK_BYTES[dtype];
  if (dtype === 'q6_k') {
    const d = f16At(data, at + 208);
    for (let j = 0; j < 16; j++) {
      const sc = (data[at + 192 + j]! << 24) >> 24;
      out.scales[j] = Math.fround(d * sc);
      out.mins[j] = 0;
    }
    for (let n = 0; n < 2; n++) {
      const ql = at + n * 64;
      const qh = at + 128 + n * 32;
      for (let l = 0; l < 32; l++) {
        const h = data[qh + l]!;
        const y = n * 128 + l;
        out.q[y] = ((data[ql + l]! & 0xf) | ((h & 3) << 4)) - 32;
        out.q[y + 32] = ((data[ql + l + 32]! & 0xf) | (((h >> 2) & 3) << 4)) - 32;
        out.q[y + 64] = ((data[ql + l]! >> 4) | (((h >> 4) & 3) << 4)) - 32;
        out.q[y + 96] = ((data[ql + l + 32]! >> 4) | (((h >> 6) & 3) << 4)) - 32;
      }
    }
    return;
  }
  const d = f16At(data, at);
  const dmin = f16At(data, at + 2);
  for (let j = 0; j < 8; j++) {
    const [sc, m] = scaleMin(j, data, at + 4);
    out.scales[j] = Math.fround(d * sc);
    out.mins[j] = Math.fround(dmin * m);
  }
  const qs = at + (dtype === 'q5_k' ? 48 : 16);
  for (let c = 0; c < 4; c++) {
    for (let l = 0; l < 32; l++) {
      const byte = data[qs + c * 32 + l]!;
      let lo = byte & 0xf;
      let hi = byte >> 4;
      if (dtype === 'q5_k') {
        const h = data[at + 16 + l]!;
        lo += (h >> (2 * c)) & 1 ? 16 : 0;
        hi += (h >> (2 * c + 1)) & 1 ? 16 : 0;
      }
      out.q[c * 64 + l] = lo;
      out.q[c * 64 + 32 + l] = hi;
    }
  }
}

/** Exact dequantization of `numBlocks` super-blocks from `firstBlock` into out (ggml's dequantize_row_*). */
export function dequantizeK(
  dtype: KQuant,
  data: Uint8Array,
  firstBlock: number,
  numBlocks: number,
  out: Float32Array,
): void {
  const blk = newKBlock();
  const sub = K_SUB_BLOCK[dtype];
  for (let b = 0; b < numBlocks; b++) {
    decodeKBlock(dtype, data, firstBlock + b, blk);
    for (let i = 0; i < QK_K; i++) {
      const j = (i / sub) | 0;
      out[b * QK_K + i] = Math.fround(Math.fround(blk.scales[j]! * blk.q[i]!) - blk.mins[j]!);
    }
  }
}

/** Encode f32 values (length a multiple of 256) as `dtype`. */
export function quantizeK(dtype: KQuant, values: Float32Array): Uint8Array {
  assert(values.length % QK_K === 0, () => `${dtype} needs a multiple of ${QK_K} weights, got ${values.length}`);
  const out = new Uint8Array((values.length / QK_K) * K_BLOCK_BYTES[dtype]);
  const bits = new Float32Bits();
  for (let b = 0; b < values.length / QK_K; b++) {
    const x = values.subarray(b * QK_K, (b + 1) * QK_K);
    const block = out.subarray(b * K_BLOCK_BYTES[dtype], (b + 1) * K_BLOCK_BYTES[dtype]);
    if (dtype === 'q6_k') quantizeQ6KBlock(x, block, bits);
    else quantizeQ45KBlock(dtype, x, block, bits);
  }
  return out;
}

const clamp = (v: number, lo: number, hi: number): number => Math.max(lo, Math.min(hi, v));

/** Min/max per sub-block of 32, scales and mins quantized to 6 bits against the block's d and dmin. */
function quantizeQ45KBlock(dtype: 'q4_k' | 'q5_k', x: Float32Array, block: Uint8Array, bits: Float32Bits): void {
  const nmax = dtype === 'q4_k' ? 15 : 31;
  const scale = new Float64Array(8);
  const min = new Float64Array(8);
  let maxScale = 0;
  let maxMin = 0;
  for (let j = 0; j < 8; j++) {
    let lo = 0;
    let hi = -Infinity;
    for (let i = j * 32; i < j * 32 + 32; i++) {
      if (x[i]! < lo) lo = x[i]!;
      if (x[i]! > hi) hi = x[i]!;
    }
    scale[j] = (hi - lo) / nmax;
    min[j] = -lo;
    if (scale[j]! > maxScale) maxScale = scale[j]!;
    if (min[j]! > maxMin) maxMin = min[j]!;
  }
  const dh = f32ToF16(maxScale / 63, bits);
  const dminh = f32ToF16(maxMin / 63, bits);
  const d = f16ToF32(dh);
  const dmin = f16ToF32(dminh);
  const sc = new Uint8Array(8);
  const m = new Uint8Array(8);
  for (let j = 0; j < 8; j++) {
    sc[j] = d > 0 ? clamp(Math.round(scale[j]! / d), 0, 63) : 0;
    m[j] = dmin > 0 ? clamp(Math.round(min[j]! / dmin), 0, 63) : 0;
  }
  block[0] = dh & 0xff;
  block[1] = dh >> 8;
  block[2] = dminh & 0xff;
  block[3] = dminh >> 8;
  for (let j = 0; j < 4; j++) {
    block[4 + j] = sc[j]! | ((sc[j + 4]! >> 4) << 6);
    block[8 + j] = m[j]! | ((m[j + 4]! >> 4) << 6);
    block[12 + j] = (sc[j + 4]! & 0xf) | ((m[j + 4]! & 0xf) << 4);
  }
  const qs = dtype === 'q5_k' ? 48 : 16;
  for (let j = 0; j < 8; j++) {
    const step = Math.fround(d * sc[j]!);
    const offset = Math.fround(dmin * m[j]!);
    const c = j >> 1;
    const high = (j & 1) === 1;
    for (let l = 0; l < 32; l++) {
      const q = step > 0 ? clamp(Math.round((x[j * 32 + l]! + offset) / step), 0, nmax) : 0;
      block[qs + c * 32 + l]! |= (q & 0xf) << (high ? 4 : 0);
      if (dtype === 'q5_k' && q >= 16) block[16 + l]! |= 1 << (2 * c + (high ? 1 : 0));
    }
  }
}

/** Per sub-block of 16: the signed value of largest magnitude maps to -32 (as ggml); scales to int8. */
function quantizeQ6KBlock(x: Float32Array, block: Uint8Array, bits: Float32Bits): void {
  const scale = new Float64Array(16);
  for (let j = 0; j < 16; j++) {
    let max = 0;
    for (let i = j * 16; i < j * 16 + 16; i++) if (Math.abs(x[i]!) > Math.abs(max)) max = x[i]!;
    scale[j] = max / -32;
  }
  let maxScale = 0;
  for (const s of scale) if (Math.abs(s) > Math.abs(maxScale)) maxScale = s;
  const dh = f32ToF16(maxScale / -128, bits);
  const d = f16ToF32(dh);
  const sc = new Int8Array(16);
  for (let j = 0; j < 16; j++) sc[j] = d !== 0 ? clamp(Math.round(scale[j]! / d), -128, 127) : 0;
  for (let j = 0; j < 16; j++) block[192 + j] = sc[j]! & 0xff;
  block[208] = dh & 0xff;
  block[209] = dh >> 8;
  for (let i = 0; i < QK_K; i++) {
    const step = Math.fround(d * sc[(i / 16) | 0]!);
    const q = step !== 0 ? clamp(Math.round(x[i]! / step) + 32, 0, 63) : 32;
    const n = (i / 128) | 0;
    const r = i % 128;
    const quarter = (r / 32) | 0; // y + 0, + 32, + 64, + 96
    const l = r % 32;
    const ql = n * 64 + l + (quarter & 1 ? 32 : 0);
    block[ql]! |= (q & 0xf) << (quarter >= 2 ? 4 : 0);
    block[128 + n * 32 + l]! |= (q >> 4) << (2 * quarter);
  }
}
