// The low-rank term of one adapted projection over a group of rows that name the same adapter:
//   y[t, off + i] += scale · Σ_j B[i, j] (Σ_k A[j, k] x[t, k])      for every row t of the group
// grouped per adapter so each pass over A and B serves two rows at once (LoraBank.add gathers the
// rows of every sequence naming the adapter, so a mixed step applies each adapter once).
// Every sum runs in the same order as one row at a time (k ascending into one accumulator per
// (row, j); j ascending per (row, i)), so the result is bit-identical whatever the grouping: a
// row's output never depends on which other rows share its step (--deterministic).
// With the native addon (a bank built with `native`: the engine's dense kernels are native) the
// products run in C instead (kernels/native/lora.c: AVX2 + FMA, single-precision sums, B kept
// transposed per pair): also a row's bits whatever its group, but not this file's bits (~1e-6).
// Must never: read or write a row outside `rows`.
import { f16ToF32, f32ToF16, type nativeLoraRows } from '../kernels/index.js';

/** The addon's LoRA term (kernels/native/lora.c). */
export type NativeLoraRows = NonNullable<ReturnType<typeof nativeLoraRows>>;

/** One adapted projection: A [rank, inDim], B [outDim, rank], row-major f32. */
export interface LoraPair {
  readonly rank: number;
  readonly inDim: number;
  readonly outDim: number;
  readonly a: Float32Array;
  readonly b: Float32Array;
  /** alpha / rank (alpha 0: 1), times the adapter's user scale. */
  readonly scale: number;
  /**
   * The file stored A and B as f16/bf16: x and A x are rounded to f16 before each product, as
   * llama.cpp's CPU backend rounds a half matmul's activations (agreement within 1e-3, not 4e-3).
   */
  readonly halfActivations: boolean;
}

const toHalf = (v: number): number => f16ToF32(f32ToF16(v));

/** Scratch buffers reused across calls (one per engine thread's bank). */
export class LoraScratch {
  tmp = new Float32Array(128);
  xHalf = new Float32Array(0);
  rows = new Int32Array(64);

  /** Room for `rows` rows of A·x and of half-rounded activations. */
  fit(p: LoraPair, rows: number): void {
    if (this.tmp.length < rows * p.rank) this.tmp = new Float32Array(rows * p.rank);
    if (p.halfActivations && this.xHalf.length < rows * p.inDim) this.xHalf = new Float32Array(rows * p.inDim);
  }
}

/**
 * Adds the pair's term to each of `rows` (row indices into x [T, inDim] and y [T, width]), the
 * output's columns starting at `offset`.
 */
export function addLoraRows(
  p: LoraPair,
  x: Float32Array,
  rows: readonly number[],
  y: Float32Array,
  width: number,
  offset: number,
  scratch: LoraScratch,
  native: NativeLoraRows | null = null,
): void {
  if (native !== null) {
    if (scratch.rows.length < rows.length) scratch.rows = new Int32Array(rows.length);
    scratch.rows.set(rows);
    const { a, rank, inDim, outDim, scale } = p;
    native(
      a,
      transposedB(p),
      x,
      scratch.rows,
      rows.length,
      y,
      rank,
      inDim,
      outDim,
      width,
      offset,
      scale,
      p.halfActivations ? 1 : 0,
    );
    return;
  }
  let r = 0;
  scratch.fit(p, 2);
  for (; r + 2 <= rows.length; r += 2) addTwo(p, x, rows[r]!, rows[r + 1]!, y, width, offset, scratch);
  if (r < rows.length) addOne(p, x, rows[r]!, y, width, offset, scratch);
}

/** B [outDim, rank] as [rank, outDim], made once per pair (the native kernel's B·(A·x) reads it by rows). */
const transposed = new WeakMap<LoraPair, Float32Array>();
function transposedB(p: LoraPair): Float32Array {
  let bT = transposed.get(p);
  if (bT === undefined) {
    const { b, rank, outDim } = p;
    bT = new Float32Array(rank * outDim);
    for (let i = 0; i < outDim; i++) for (let q = 0; q < rank; q++) bT[q * outDim + i] = b[i * rank + q]!;
    transposed.set(p, bT);
  }
  return bT;
}

/** x's row t, as the products read it (rounded to f16 for a half adapter): [array, start]. */
function rowOf(p: LoraPair, x: Float32Array, t: number, slot: number, s: LoraScratch): [Float32Array, number] {
  const { inDim } = p;
  if (!p.halfActivations) return [x, t * inDim];
  const at = slot * inDim;
  for (let k = 0; k < inDim; k++) s.xHalf[at + k] = toHalf(x[t * inDim + k]!);
  return [s.xHalf, at];
}

function addOne(
  p: LoraPair,
  x: Float32Array,
  t: number,
  y: Float32Array,
  width: number,
  offset: number,
  s: LoraScratch,
): void {
  const { rank, inDim, outDim, a, b, scale } = p;
  const [xs, at] = rowOf(p, x, t, 0, s);
  const tmp = s.tmp;
  let j = 0;
  for (; j + 4 <= rank; j += 4) {
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    const r0 = j * inDim;
    const r1 = r0 + inDim;
    const r2 = r1 + inDim;
    const r3 = r2 + inDim;
    for (let k = 0; k < inDim; k++) {
      const xk = xs[at + k]!;
      s0 += a[r0 + k]! * xk;
      s1 += a[r1 + k]! * xk;
      s2 += a[r2 + k]! * xk;
      s3 += a[r3 + k]! * xk;
    }
    tmp[j] = s0;
    tmp[j + 1] = s1;
    tmp[j + 2] = s2;
    tmp[j + 3] = s3;
  }
  for (; j < rank; j++) {
    let sum = 0;
    const row = j * inDim;
    for (let k = 0; k < inDim; k++) sum += a[row + k]! * xs[at + k]!;
    tmp[j] = sum;
  }
  if (p.halfActivations) for (let q = 0; q < rank; q++) tmp[q] = toHalf(tmp[q]!);
  const yAt = t * width + offset;
  for (let i = 0; i < outDim; i++) {
    let sum = 0;
    const row = i * rank;
    for (let q = 0; q < rank; q++) sum += b[row + q]! * tmp[q]!;
    y[yAt + i] = y[yAt + i]! + scale * sum;
  }
}

/** Two rows at once: each pass over four rows of A, and each row of B, serves both. */
function addTwo(
  p: LoraPair,
  x: Float32Array,
  t0: number,
  t1: number,
  y: Float32Array,
  width: number,
  offset: number,
  s: LoraScratch,
): void {
  const { rank, inDim, outDim, a, b, scale } = p;
  const [x0, at0] = rowOf(p, x, t0, 0, s);
  const [x1, at1] = rowOf(p, x, t1, 1, s);
  const tmp = s.tmp; // row 0's A·x at [0, rank), row 1's at [rank, 2 rank)
  let j = 0;
  for (; j + 4 <= rank; j += 4) {
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    let b0 = 0;
    let b1 = 0;
    let b2 = 0;
    let b3 = 0;
    const r0 = j * inDim;
    const r1 = r0 + inDim;
    const r2 = r1 + inDim;
    const r3 = r2 + inDim;
    for (let k = 0; k < inDim; k++) {
      const u = x0[at0 + k]!;
      const v = x1[at1 + k]!;
      const w0 = a[r0 + k]!;
      const w1 = a[r1 + k]!;
      const w2 = a[r2 + k]!;
      const w3 = a[r3 + k]!;
      a0 += w0 * u;
      a1 += w1 * u;
      a2 += w2 * u;
      a3 += w3 * u;
      b0 += w0 * v;
      b1 += w1 * v;
      b2 += w2 * v;
      b3 += w3 * v;
    }
    tmp[j] = a0;
    tmp[j + 1] = a1;
    tmp[j + 2] = a2;
    tmp[j + 3] = a3;
    tmp[rank + j] = b0;
    tmp[rank + j + 1] = b1;
    tmp[rank + j + 2] = b2;
    tmp[rank + j + 3] = b3;
  }
  for (; j < rank; j++) {
    let u = 0;
    let v = 0;
    const row = j * inDim;
    for (let k = 0; k < inDim; k++) {
      u += a[row + k]! * x0[at0 + k]!;
      v += a[row + k]! * x1[at1 + k]!;
    }
    tmp[j] = u;
    tmp[rank + j] = v;
  }
  if (p.halfActivations) for (let q = 0; q < 2 * rank; q++) tmp[q] = toHalf(tmp[q]!);
  const y0 = t0 * width + offset;
  const y1 = t1 * width + offset;
  for (let i = 0; i < outDim; i++) {
    let u = 0;
    let v = 0;
    const row = i * rank;
    for (let q = 0; q < rank; q++) {
      const w = b[row + q]!;
      u += w * tmp[q]!;
      v += w * tmp[rank + q]!;
    }
    y[y0 + i] = y[y0 + i]! + scale * u;
    y[y1 + i] = y[y1 + i]! + scale * v;
  }
}
