// The block-weight (q8_0, q4_0) half of the batch-invariant dense matmul; dense.ts owns the
// arithmetic contract it follows (for each block b: bacc = Σ over its 8 vectors of x·q, in
// element order; acc += bacc * d[b]; then hsum). Weights arrive repacked by ../dense.ts:
//   q      [rows][nb][16 bytes of nibbles in GGML order (q4_0) | 32 int8 (q8_0)]
//   scales [rows][nb] f32
// m < 4: blocks are decoded in registers where they are used; m >= 4: a row is decoded once
// into scratch and reused for every x row. Never writes outside y and its scratch.
import { hsum } from './simd';

export const KIND_Q8_0 = 3;
export const KIND_Q4_0 = 4;

// ---- block tiles: q = decoded (unscaled) values, rows at stride qs; sc = scales, rows at stride scs ----

@inline
function dotBlocked(q: usize, sc: usize, x: usize, nb: i32): f32 {
  let acc = f32x4.splat(0);
  for (let b = 0; b < nb; b++) {
    const o = <usize>b << 7;
    let bacc = f32x4.splat(0);
    for (let v: usize = 0; v < 128; v += 16) bacc = f32x4.add(bacc, f32x4.mul(v128.load(x + o + v), v128.load(q + o + v)));
    acc = f32x4.add(acc, f32x4.mul(bacc, f32x4.splat(load<f32>(sc + (<usize>b << 2)))));
  }
  return hsum(acc);
}

function tile4x1b(q: usize, sc: usize, x: usize, xs: usize, nb: i32, y: usize, ys: usize): void {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
  const x1 = x + xs, x2 = x1 + xs, x3 = x2 + xs;
  for (let b = 0; b < nb; b++) {
    const o = <usize>b << 7;
    let b0 = f32x4.splat(0), b1 = b0, b2 = b0, b3 = b0;
    for (let v: usize = 0; v < 128; v += 16) {
      const qv = v128.load(q + o + v);
      b0 = f32x4.add(b0, f32x4.mul(v128.load(x + o + v), qv));
      b1 = f32x4.add(b1, f32x4.mul(v128.load(x1 + o + v), qv));
      b2 = f32x4.add(b2, f32x4.mul(v128.load(x2 + o + v), qv));
      b3 = f32x4.add(b3, f32x4.mul(v128.load(x3 + o + v), qv));
    }
    const d = f32x4.splat(load<f32>(sc + (<usize>b << 2)));
    a0 = f32x4.add(a0, f32x4.mul(b0, d));
    a1 = f32x4.add(a1, f32x4.mul(b1, d));
    a2 = f32x4.add(a2, f32x4.mul(b2, d));
    a3 = f32x4.add(a3, f32x4.mul(b3, d));
  }
  store<f32>(y, hsum(a0)); store<f32>(y + ys, hsum(a1)); store<f32>(y + 2 * ys, hsum(a2)); store<f32>(y + 3 * ys, hsum(a3));
}

/** One decoded weight row (q, sc) against all m x rows. */
function blockRow(q: usize, sc: usize, x: usize, m: i32, cols: i32, y: usize, ys: usize): void {
  const xs = <usize>cols << 2;
  const nb = cols >> 5;
  let i = 0;
  for (; i + 4 <= m; i += 4) tile4x1b(q, sc, x + <usize>i * xs, xs, nb, y + <usize>i * ys, ys);
  for (; i < m; i++) store<f32>(y + <usize>i * ys, dotBlocked(q, sc, x + <usize>i * xs, nb));
}

// ---- block weights, repacked: q = [rows][nb][16 (q4: nibbles) | 32 (q8: int8)], scales = [rows][nb] f32 ----

@inline
function q4Low(packed: v128): v128 {
  return i8x16.sub(v128.and(packed, i8x16.splat(15)), i8x16.splat(8)); // elements 0..15
}

@inline
function q4High(packed: v128): v128 {
  return i8x16.sub(i8x16.shr_u(packed, 4), i8x16.splat(8)); // elements 16..31
}

/** Elements [4 * part, 4 * part + 4) of 16 int8 lanes as f32. */
@inline
function i8Part(v: v128, part: i32): v128 {
  const half = part < 2 ? i16x8.extend_low_i8x16_s(v) : i16x8.extend_high_i8x16_s(v);
  return f32x4.convert_i32x4_s((part & 1) == 0 ? i32x4.extend_low_i16x8_s(half) : i32x4.extend_high_i16x8_s(half));
}

@inline
function storeI8x16(out: usize, v: v128): void {
  v128.store(out, i8Part(v, 0));
  v128.store(out, i8Part(v, 1), 16);
  v128.store(out, i8Part(v, 2), 32);
  v128.store(out, i8Part(v, 3), 48);
}

/** Decode g rows from row r to f32 values (unscaled) at out; scales are read in place. */
function decodeBlocks(kind: i32, q: usize, r: i32, g: i32, nb: i32, out: usize): void {
  const blocks = <usize>g * nb;
  if (kind == KIND_Q4_0) {
    const src = q + <usize>r * nb * 16;
    for (let b: usize = 0; b < blocks; b++) {
      const packed = v128.load(src + (b << 4));
      storeI8x16(out + (b << 7), q4Low(packed));
      storeI8x16(out + (b << 7) + 64, q4High(packed));
    }
  } else {
    const src = q + <usize>r * nb * 32;
    for (let b: usize = 0; b < blocks; b++) {
      storeI8x16(out + (b << 7), v128.load(src + (b << 5)));
      storeI8x16(out + (b << 7) + 64, v128.load(src + (b << 5), 16));
    }
  }
}

/** One block's sum Σ x·q over its 8 vectors (lo parts, then hi parts): dotBlocked's inner order. */
@inline
function blockDot(lo: v128, hi: v128, xo: usize): v128 {
  let bacc = f32x4.splat(0);
  bacc = f32x4.add(bacc, f32x4.mul(v128.load(xo), i8Part(lo, 0)));
  bacc = f32x4.add(bacc, f32x4.mul(v128.load(xo, 16), i8Part(lo, 1)));
  bacc = f32x4.add(bacc, f32x4.mul(v128.load(xo, 32), i8Part(lo, 2)));
  bacc = f32x4.add(bacc, f32x4.mul(v128.load(xo, 48), i8Part(lo, 3)));
  bacc = f32x4.add(bacc, f32x4.mul(v128.load(xo, 64), i8Part(hi, 0)));
  bacc = f32x4.add(bacc, f32x4.mul(v128.load(xo, 80), i8Part(hi, 1)));
  bacc = f32x4.add(bacc, f32x4.mul(v128.load(xo, 96), i8Part(hi, 2)));
  bacc = f32x4.add(bacc, f32x4.mul(v128.load(xo, 112), i8Part(hi, 3)));
  return bacc;
}

function dotQ4(q: usize, sc: usize, x: usize, nb: i32): f32 {
  let acc = f32x4.splat(0);
  for (let b = 0; b < nb; b++) {
    const packed = v128.load(q + (<usize>b << 4));
    acc = f32x4.add(acc, f32x4.mul(blockDot(q4Low(packed), q4High(packed), x + (<usize>b << 7)), f32x4.splat(load<f32>(sc + (<usize>b << 2)))));
  }
  return hsum(acc);
}

function dotQ8(q: usize, sc: usize, x: usize, nb: i32): f32 {
  let acc = f32x4.splat(0);
  for (let b = 0; b < nb; b++) {
    const p = q + (<usize>b << 5);
    acc = f32x4.add(acc, f32x4.mul(blockDot(v128.load(p), v128.load(p, 16), x + (<usize>b << 7)), f32x4.splat(load<f32>(sc + (<usize>b << 2)))));
  }
  return hsum(acc);
}

export function blockMatmul(kind: i32, q: usize, scales: usize, x: usize, y: usize, m: i32, rows: i32, cols: i32, r0: i32, r1: i32, scratch: usize): void {
  const nb = cols >> 5;
  const ys = <usize>rows << 2;
  const xs = <usize>cols << 2;
  const qs = kind == KIND_Q4_0 ? <usize>nb << 4 : <usize>nb << 5;
  let r = r0;
  if (m < 4) {
    // Few x rows: decode each block in registers, right where it is used.
    for (; r < r1; r++) {
      for (let i = 0; i < m; i++) {
        const v = kind == KIND_Q4_0 ? dotQ4(q + <usize>r * qs, scales + <usize>r * nb * 4, x + <usize>i * xs, nb) : dotQ8(q + <usize>r * qs, scales + <usize>r * nb * 4, x + <usize>i * xs, nb);
        store<f32>(y + <usize>i * ys + (<usize>r << 2), v);
      }
    }
  }
  // Many x rows: decode a row once into scratch, use it for all of them.
  const rowsAt = scratch;
  for (; r < r1; r++) {
    decodeBlocks(kind, q, r, 1, nb, rowsAt);
    blockRow(rowsAt, scales + <usize>r * nb * 4, x, m, cols, y + (<usize>r << 2), ys);
  }
}

