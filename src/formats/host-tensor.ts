// Small helpers over HostTensor for callers that want plain f32 values (norm weights, biases,
// tests comparing formats). Always a fresh array; the file bytes are never modified.
import { dequantize, type HostTensor } from '../kernels/index.js';

export function elementCount(t: Pick<HostTensor, 'shape'>): number {
  return t.shape.reduce((a, b) => a * b, 1);
}

/** Every value of `t` as f32 (dequantized for q8_0/q4_0), in row-major order. */
export function tensorToF32(t: HostTensor): Float32Array {
  const n = elementCount(t);
  const out = new Float32Array(n);
  if (t.dtype === 'f32' && t.data.byteOffset % 4 === 0) {
    out.set(new Float32Array(t.data.buffer, t.data.byteOffset, n));
    return out;
  }
  dequantize(t.dtype, t.data, 0, n, out);
  return out;
}
