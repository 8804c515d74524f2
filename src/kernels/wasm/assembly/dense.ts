// Batch-invariant dense matmul, y[i][r] = Σ_k x[i][k] · W[r][k], for every weight dtype.
// Owns the one arithmetic of a dot product; must never let it depend on m, on the tile a dot
// lands in, or on which thread computes it. Every tile below performs, per (i, r):
//
//   float weights (f32, f16, bf16):             block weights (q8_0, q4_0):
//     acc = 0 (f32x4)                              acc = 0
//     for k in steps of 4: acc += x[k..] * w[k..]  for each block b: bacc = 0
//     s = hsum(acc)                                  for k in b's 8 vectors: bacc += x[k..] * q[k..]
//     for the last cols % 4: s += x[k] * w[k]        acc += bacc * d[b]
//                                                  s = hsum(acc)
//
// Tiles only change which dots share a loop (to reuse loaded x and w), never this order, so a
// row's result is bit-identical whatever m is. Below m = 8 every tile streams one weight row
// front to back: on this machine one sequential stream reads DRAM ~2x faster than 2-8
// interleaved row streams (measured), and decode at small m is bound by that read. Block weights live in dense-blocks.ts; f16/bf16
// rows are decoded a few at a time into a small scratch, so weights stay compact in memory.
import { KIND_Q4_0, KIND_Q8_0, blockMatmul } from './dense-blocks';
import { f16ToF32, f16x4ToF32, hsum } from './simd';

const KIND_F32 = 0;
const KIND_F16 = 1;
const KIND_BF16 = 2;
/** From this m on, tiles read 2 weight rows at once (more reuse of x); below, 1 (one stream). */
const WIDE_TILE_MIN_M = 8;

// ---- float tiles: weight rows at w (stride ws), x rows at x (stride xs), y[i][r] at y + i*ys + r*4 ----

/** The end of one dot: hsum of its accumulator, then the scalar tail (cols % 4). */
@inline
function finishDot(x: usize, w: usize, cols: i32, acc: v128): f32 {
  let s = hsum(acc);
  for (let o = <usize>(cols & ~3) << 2; o < (<usize>cols << 2); o += 4) s += load<f32>(x + o) * load<f32>(w + o);
  return s;
}

/** 1 x row · 1 weight row: one sequential stream, one dependency chain. */
function dot1(w: usize, x: usize, cols: i32): f32 {
  const n4 = <usize>(cols & ~3) << 2;
  let a = f32x4.splat(0);
  for (let o: usize = 0; o < n4; o += 16) a = f32x4.add(a, f32x4.mul(v128.load(x + o), v128.load(w + o)));
  return finishDot(x, w, cols, a);
}

/** 2 x rows · 1 weight row. */
function tile2x1(w: usize, x: usize, xs: usize, cols: i32, y: usize, ys: usize): void {
  const n4 = <usize>(cols & ~3) << 2;
  const x1 = x + xs;
  let a = f32x4.splat(0), b = a;
  for (let o: usize = 0; o < n4; o += 16) {
    const wv = v128.load(w + o);
    a = f32x4.add(a, f32x4.mul(v128.load(x + o), wv));
    b = f32x4.add(b, f32x4.mul(v128.load(x1 + o), wv));
  }
  store<f32>(y, finishDot(x, w, cols, a));
  store<f32>(y + ys, finishDot(x1, w, cols, b));
}

/** 4 x rows · 1 weight row: still one weight stream, four chains. */
function tile4x1(w: usize, x: usize, xs: usize, cols: i32, y: usize, ys: usize): void {
  const n4 = <usize>(cols & ~3) << 2;
  const x1 = x + xs, x2 = x1 + xs, x3 = x2 + xs;
  let a = f32x4.splat(0), b = a, c = a, d = a;
  for (let o: usize = 0; o < n4; o += 16) {
    const wv = v128.load(w + o);
    a = f32x4.add(a, f32x4.mul(v128.load(x + o), wv));
    b = f32x4.add(b, f32x4.mul(v128.load(x1 + o), wv));
    c = f32x4.add(c, f32x4.mul(v128.load(x2 + o), wv));
    d = f32x4.add(d, f32x4.mul(v128.load(x3 + o), wv));
  }
  store<f32>(y, finishDot(x, w, cols, a));
  store<f32>(y + ys, finishDot(x1, w, cols, b));
  store<f32>(y + 2 * ys, finishDot(x2, w, cols, c));
  store<f32>(y + 3 * ys, finishDot(x3, w, cols, d));
}

/** 4 x rows · 2 weight rows: eight chains, x and w each loaded once per use pair. */
function tile4x2(w: usize, ws: usize, x: usize, xs: usize, cols: i32, y: usize, ys: usize): void {
  const n4 = <usize>(cols & ~3) << 2;
  let a00 = f32x4.splat(0), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  const w1 = w + ws, x1 = x + xs, x2 = x1 + xs, x3 = x2 + xs;
  for (let o: usize = 0; o < n4; o += 16) {
    const v0 = v128.load(w + o), v1 = v128.load(w1 + o);
    let xv = v128.load(x + o);
    a00 = f32x4.add(a00, f32x4.mul(xv, v0)); a01 = f32x4.add(a01, f32x4.mul(xv, v1));
    xv = v128.load(x1 + o);
    a10 = f32x4.add(a10, f32x4.mul(xv, v0)); a11 = f32x4.add(a11, f32x4.mul(xv, v1));
    xv = v128.load(x2 + o);
    a20 = f32x4.add(a20, f32x4.mul(xv, v0)); a21 = f32x4.add(a21, f32x4.mul(xv, v1));
    xv = v128.load(x3 + o);
    a30 = f32x4.add(a30, f32x4.mul(xv, v0)); a31 = f32x4.add(a31, f32x4.mul(xv, v1));
  }
  store<f32>(y, finishDot(x, w, cols, a00)); store<f32>(y, finishDot(x, w1, cols, a01), 4);
  store<f32>(y + ys, finishDot(x1, w, cols, a10)); store<f32>(y + ys, finishDot(x1, w1, cols, a11), 4);
  store<f32>(y + 2 * ys, finishDot(x2, w, cols, a20)); store<f32>(y + 2 * ys, finishDot(x2, w1, cols, a21), 4);
  store<f32>(y + 3 * ys, finishDot(x3, w, cols, a30)); store<f32>(y + 3 * ys, finishDot(x3, w1, cols, a31), 4);
}

/** Weight rows [0, g) (g = 1 or 2) at w against all m x rows. */
function floatGroup(w: usize, ws: usize, g: i32, x: usize, m: i32, cols: i32, y: usize, ys: usize): void {
  const xs = <usize>cols << 2;
  let i = 0;
  if (g == 2) for (; i + 4 <= m; i += 4) tile4x2(w, ws, x + <usize>i * xs, xs, cols, y + <usize>i * ys, ys);
  for (let j = 0; j < g; j++) {
    const wj = w + <usize>j * ws, yj = y + (<usize>j << 2);
    let k = i;
    for (; k + 4 <= m; k += 4) tile4x1(wj, x + <usize>k * xs, xs, cols, yj + <usize>k * ys, ys);
    if (k + 2 <= m) {
      tile2x1(wj, x + <usize>k * xs, xs, cols, yj + <usize>k * ys, ys);
      k += 2;
    }
    if (k < m) store<f32>(yj + <usize>k * ys, dot1(wj, x + <usize>k * xs, cols));
  }
}

// ---- float weights: f16/bf16 rows decoded into scratch ----

function decodeF16(w: usize, r: i32, g: i32, cols: i32, out: usize): void {
  const n = <usize>g * cols;
  const src = w + <usize>r * cols * 2;
  let k: usize = 0;
  for (; k + 8 <= n; k += 8) {
    const h = v128.load(src + (k << 1));
    v128.store(out + (k << 2), f16x4ToF32(i32x4.extend_low_i16x8_u(h)));
    v128.store(out + (k << 2), f16x4ToF32(i32x4.extend_high_i16x8_u(h)), 16);
  }
  for (; k < n; k++) store<f32>(out + (k << 2), f16ToF32(load<u16>(src + (k << 1))));
}

function decodeBf16(w: usize, r: i32, g: i32, cols: i32, out: usize): void {
  const n = <usize>g * cols;
  const src = w + <usize>r * cols * 2;
  let k: usize = 0;
  for (; k + 8 <= n; k += 8) {
    const h = v128.load(src + (k << 1));
    v128.store(out + (k << 2), i32x4.shl(i32x4.extend_low_i16x8_u(h), 16));
    v128.store(out + (k << 2), i32x4.shl(i32x4.extend_high_i16x8_u(h), 16), 16);
  }
  for (; k < n; k++) store<u32>(out + (k << 2), <u32>load<u16>(src + (k << 1)) << 16);
}

function floatMatmul(kind: i32, w: usize, x: usize, y: usize, m: i32, rows: i32, cols: i32, r0: i32, r1: i32, scratch: usize): void {
  const ys = <usize>rows << 2;
  const group = m >= WIDE_TILE_MIN_M ? 2 : 1;
  for (let r = r0; r < r1; r += group) {
    const g = min(group, r1 - r);
    let rowsAt = scratch;
    if (kind == KIND_F32) rowsAt = w + <usize>r * cols * 4;
    else if (kind == KIND_F16) decodeF16(w, r, g, cols, scratch);
    else decodeBf16(w, r, g, cols, scratch);
    floatGroup(rowsAt, <usize>cols << 2, g, x, m, cols, y + (<usize>r << 2), ys);
  }
}

/**
 * Rows [r0, r1) of y = x · Wᵀ; y has row stride `rows`. w: the weight (for block kinds, the
 * repacked q array), scales: f32 block scales (block kinds only). scratch needs
 * 8 * cols * 4 + 64 bytes.
 */
export function matmul(kind: i32, w: usize, scales: usize, x: usize, y: usize, m: i32, rows: i32, cols: i32, r0: i32, r1: i32, scratch: usize): void {
  if (kind == KIND_Q8_0 || kind == KIND_Q4_0) blockMatmul(kind, w, scales, x, y, m, rows, cols, r0, r1, scratch);
  else floatMatmul(kind, w, x, y, m, rows, cols, r0, r1, scratch);
}
