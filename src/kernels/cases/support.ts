// Helpers for the shared kernel case suites: seeded random data, weight tensors in every dtype,
// and comparisons that throw a descriptive Error on the first mismatch (the suites stay free of
// any test framework, so src/ code never imports vitest). Test-only: never used by the engine.
import { Rng } from '../../core/index.js';
import { bf16ToF32, dequantize, f16ToF32, f32ToBf16, f32ToF16, quantize } from '../formats.js';
import type { HostTensor, WeightDType } from '../types.js';

/** One named check, run by a test file as `it(name, () => run(backend))`. */
export interface KernelCase<Backend> {
  readonly name: string;
  run(backend: Backend): Promise<void> | void;
}

export function randomF32(rng: Rng, length: number, scale = 1): Float32Array {
  return Float32Array.from({ length }, () => rng.normal() * scale);
}

/** A [rows, cols] weight in `dtype` from normal values (quantized like a model writer would). */
export function randomWeight(rng: Rng, dtype: WeightDType, rows: number, cols: number, scale = 0.05): HostTensor {
  return {
    name: `w.${dtype}.${rows}x${cols}`,
    dtype,
    shape: [rows, cols],
    data: quantize(dtype, randomF32(rng, rows * cols, scale)),
  };
}

/** The weight's values as f32 (exact), row-major. */
export function weightValues(weight: HostTensor): Float32Array {
  const out = new Float32Array(weight.shape[0]! * weight.shape[1]!);
  dequantize(weight.dtype, weight.data, 0, out.length, out);
  return out;
}

/** Σ_k |x[i][k] · w[r][k]|: the scale against which a dot product's rounding error is judged. */
export function dotMagnitudes(x: Float32Array, m: number, w: Float32Array, rows: number, cols: number): Float64Array {
  const out = new Float64Array(m * rows);
  for (let i = 0; i < m; i++) {
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      for (let k = 0; k < cols; k++) sum += Math.abs(x[i * cols + k]! * w[r * cols + k]!);
      out[i * rows + r] = sum;
    }
  }
  return out;
}

/**
 * Throws unless |actual[i] - expected[i]| <= bound(i) for every i < length, and both are
 * finite (a NaN anywhere, e.g. from reading a poisoned page, fails).
 */
export function expectWithin(
  what: string,
  actual: Float32Array,
  expected: Float32Array,
  length: number,
  bound: (i: number) => number,
): void {
  for (let i = 0; i < length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    if (!Number.isFinite(a) || !Number.isFinite(e)) throw new Error(`${what}: element ${i} is ${a}, expected ${e}`);
    const ratio = Math.abs(a - e) / bound(i);
    if (!(ratio <= 1))
      throw new Error(`${what}: element ${i} is ${a}, expected ${e} (error ${Math.abs(a - e)} > bound ${bound(i)})`);
  }
  if (length === 0) throw new Error(`${what}: nothing compared`);
}

/** Throws unless the first `length` elements are bit-identical. */
export function expectBitwiseEqual(what: string, actual: Float32Array, expected: Float32Array, length: number): void {
  const a = new Uint32Array(actual.buffer, actual.byteOffset, length);
  const e = new Uint32Array(expected.buffer, expected.byteOffset, length);
  for (let i = 0; i < length; i++) {
    if (a[i] !== e[i]) throw new Error(`${what}: element ${i} differs: ${actual[i]} vs ${expected[i]}`);
  }
  if (length === 0) throw new Error(`${what}: nothing compared`);
}

export function expectThrows(what: string, fn: () => unknown): Promise<void> {
  return Promise.resolve()
    .then(fn)
    .then(
      () => {
        throw new Error(`${what}: expected an error, got none`);
      },
      () => undefined,
    );
}

/**
 * x as llama.cpp's CPU backend feeds it to a dot product with `dtype` weights (ggml-cpu, x86),
 * dequantized back to f32 — so an exact matmul over it is what llama.cpp computes, up to float
 * rounding of the sums:
 *   q4_0, q8_0: Q8_0, per 32: id = 127/amax, q = round-half-even(x * id), d = f16(amax / 127)
 *   K-quants:   Q8_K, per 256: iscale = 127/amax, q = round-half-even(iscale * x), d = 1/iscale
 *   f16, bf16:  x rounded to the weight's type (nearest even); f32: x itself
 * Each row of `cols` values on its own (cols a multiple of 32, of 256 for K-quants).
 */
export function activationsAsLlamaCpp(dtype: WeightDType, x: Float32Array, cols: number): Float32Array {
  const out = new Float32Array(x.length);
  if (dtype === 'f32') return Float32Array.from(x);
  if (dtype === 'f16') return out.map((_, i) => f16ToF32(f32ToF16(x[i]!)));
  if (dtype === 'bf16') return out.map((_, i) => bf16ToF32(f32ToBf16(x[i]!)));
  const group = dtype === 'q4_0' || dtype === 'q8_0' ? 32 : 256;
  if (cols % group !== 0) throw new Error(`activationsAsLlamaCpp: ${dtype} needs cols % ${group} === 0`);
  const f = Math.fround;
  for (let at = 0; at < x.length; at += group) {
    let amax = 0;
    for (let k = at; k < at + group; k++) amax = Math.max(amax, Math.abs(x[k]!));
    if (amax === 0) continue;
    const id = f(127 / amax);
    const d = group === 32 ? f16ToF32(f32ToF16(f(amax / 127))) : f(1 / id);
    for (let k = at; k < at + group; k++) out[k] = roundHalfEven(f(x[k]! * id)) * d;
  }
  return out;
}

function roundHalfEven(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}
