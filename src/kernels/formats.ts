// Weight storage formats: IEEE half (f16), bfloat16, and GGML's q8_0 and q4_0 blocks.
// Conversions to and from f32, shared by the model loaders/writers (gen-model) and every
// dense backend. Dequantisation is exact: it reproduces what llama.cpp computes.
//
//   q8_0 block (34 bytes, 32 weights):  f16 d | int8 q[32]          w[j] = d * q[j]
//   q4_0 block (18 bytes, 32 weights):  f16 d | u8 qs[16]            w[j]    = d * ((qs[j] & 15) - 8)
//                                                                     w[j+16] = d * ((qs[j] >> 4) - 8)
//   q4_k, q5_k, q6_k: 256-weight super-blocks, see kquants.ts
import { assert } from '../core/index.js';
import { Float32Bits, f16ToF32, f32ToF16 } from './half.js';
import { QK_K, K_BLOCK_BYTES, dequantizeK, quantizeK } from './kquants.js';
import type { WeightDType } from './types.js';

export { Float32Bits, f16ToF32, f32ToF16 } from './half.js';

export const QK = 32;
export const Q8_0_BLOCK_BYTES = 34;
export const Q4_0_BLOCK_BYTES = 18;

/** f32 -> bf16 bits, round to nearest even. */
export function f32ToBf16(value: number, bits: Float32Bits = new Float32Bits()): number {
  const x = bits.bitsOf(value);
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff; // quiet nan
  const rounding = 0x7fff + ((x >>> 16) & 1);
  return ((x + rounding) >>> 16) & 0xffff;
}

/** bf16 bits -> f32 (exact). */
export function bf16ToF32(b: number, bits: Float32Bits = new Float32Bits()): number {
  return bits.floatOf((b & 0xffff) << 16);
}

/** Bytes needed to store `count` weights (count a multiple of 32 for block formats). */
export function byteSize(dtype: WeightDType, count: number): number {
  switch (dtype) {
    case 'f32':
      return count * 4;
    case 'f16':
    case 'bf16':
      return count * 2;
    case 'q8_0':
      assert(count % QK === 0, `q8_0 needs a multiple of ${QK} weights, got ${count}`);
      return (count / QK) * Q8_0_BLOCK_BYTES;
    case 'q4_0':
      assert(count % QK === 0, `q4_0 needs a multiple of ${QK} weights, got ${count}`);
      return (count / QK) * Q4_0_BLOCK_BYTES;
    case 'q4_k':
    case 'q5_k':
    case 'q6_k':
      assert(count % QK_K === 0, `${dtype} needs a multiple of ${QK_K} weights, got ${count}`);
      return (count / QK_K) * K_BLOCK_BYTES[dtype];
  }
}

/** Decode `count` weights starting at weight index `first` of `data` into out[0..count). */
export function dequantize(
  dtype: WeightDType,
  data: Uint8Array,
  first: number,
  count: number,
  out: Float32Array,
): void {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const bits = new Float32Bits();
  switch (dtype) {
    case 'f32':
      for (let i = 0; i < count; i++) out[i] = view.getFloat32((first + i) * 4, true);
      return;
    case 'f16':
      for (let i = 0; i < count; i++) out[i] = f16ToF32(view.getUint16((first + i) * 2, true));
      return;
    case 'bf16':
      for (let i = 0; i < count; i++) out[i] = bf16ToF32(view.getUint16((first + i) * 2, true), bits);
      return;
    case 'q8_0': {
      assert(first % QK === 0 && count % QK === 0, 'q8_0 dequantize must be block aligned');
      for (let b = 0; b < count / QK; b++) {
        const at = (first / QK + b) * Q8_0_BLOCK_BYTES;
        const d = f16ToF32(view.getUint16(at, true));
        for (let j = 0; j < QK; j++) out[b * QK + j] = d * view.getInt8(at + 2 + j);
      }
      return;
    }
    case 'q4_0': {
      assert(first % QK === 0 && count % QK === 0, 'q4_0 dequantize must be block aligned');
      for (let b = 0; b < count / QK; b++) {
        const at = (first / QK + b) * Q4_0_BLOCK_BYTES;
        const d = f16ToF32(view.getUint16(at, true));
        for (let j = 0; j < QK / 2; j++) {
          const byte = data[at + 2 + j]!;
          out[b * QK + j] = d * ((byte & 15) - 8);
          out[b * QK + j + QK / 2] = d * ((byte >> 4) - 8);
        }
      }
      return;
    }
    case 'q4_k':
    case 'q5_k':
    case 'q6_k':
      assert(first % QK_K === 0 && count % QK_K === 0, `${dtype} dequantize must be super-block aligned`);
      dequantizeK(dtype, data, first / QK_K, count / QK_K, out);
      return;
  }
}

/** Encode f32 weights into `dtype` (count a multiple of 32 for block formats). */
export function quantize(dtype: WeightDType, values: Float32Array): Uint8Array {
  const out = new Uint8Array(byteSize(dtype, values.length));
  const view = new DataView(out.buffer);
  const bits = new Float32Bits();
  switch (dtype) {
    case 'f32':
      out.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
      return out;
    case 'f16':
      values.forEach((v, i) => view.setUint16(i * 2, f32ToF16(v, bits), true));
      return out;
    case 'bf16':
      values.forEach((v, i) => view.setUint16(i * 2, f32ToBf16(v, bits), true));
      return out;
    case 'q8_0':
      for (let b = 0; b < values.length / QK; b++) {
        let amax = 0;
        for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(values[b * QK + j]!));
        const d = amax / 127;
        const id = d !== 0 ? 1 / d : 0;
        const at = b * Q8_0_BLOCK_BYTES;
        view.setUint16(at, f32ToF16(d, bits), true);
        for (let j = 0; j < QK; j++) view.setInt8(at + 2 + j, roundHalfAway(values[b * QK + j]! * id));
      }
      return out;
    case 'q4_0':
      for (let b = 0; b < values.length / QK; b++) {
        // ggml's reference: the signed value of largest magnitude maps to -8.
        let amax = 0;
        let max = 0;
        for (let j = 0; j < QK; j++) {
          const v = values[b * QK + j]!;
          if (Math.abs(v) > amax) {
            amax = Math.abs(v);
            max = v;
          }
        }
        const d = max / -8;
        const id = d !== 0 ? 1 / d : 0;
        const at = b * Q4_0_BLOCK_BYTES;
        view.setUint16(at, f32ToF16(d, bits), true);
        for (let j = 0; j < QK / 2; j++) {
          const lo = Math.min(15, Math.trunc(values[b * QK + j]! * id + 8.5));
          const hi = Math.min(15, Math.trunc(values[b * QK + j + QK / 2]! * id + 8.5));
          out[at + 2 + j] = lo | (hi << 4);
        }
      }
      return out;
    case 'q4_k':
    case 'q5_k':
    case 'q6_k':
      return quantizeK(dtype, values);
  }
}

function roundHalfAway(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x);
}
