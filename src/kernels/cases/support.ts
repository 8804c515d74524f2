// Helpers for the shared kernel case suites: seeded random data, weight tensors in every dtype,
// and comparisons that throw a descriptive Error on the first mismatch (the suites stay free of
// any test framework, so src/ code never imports vitest). Test-only: never used by the engine.
import { Rng } from '../../core/index.js';
import { dequantize, quantize } from '../formats.js';
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
