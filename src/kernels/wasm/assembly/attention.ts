// Paged causal attention with GQA for one request in one layer, over an f32 or an f16 KV pool
// (f16: bit patterns, promoted to f32 exactly, a page's plane at a time, before any sum; every
// sum is f32 in both, by the same code, so f16 attention equals f32 attention over the promoted
// values bit for bit). Reads K and V only through the page table it is given and only positions
// [0, startPos + t] for query token t (with a sliding window, only the last `window` of them);
// it never checks ownership (the caller verified every page). Each (token, head) is computed by
// the same arithmetic whatever numTokens is, so chunked prefill and decode give bit-identical
// outputs. The pool may hold any half, inf and nan included: every one is promoted exactly. A
// q8_0 pool (attentionQ8) is dequantized a page's plane at a time (d * qs, exact in f32) into the
// same scratch as f16's, then summed by the same code: q8_0 attention equals f32 attention over
// the dequantized values bit for bit (the fallback where the native kernel is absent).
//
//   pool layout (page-major, see src/pages/kv-layout.ts), e = 4 (f32) or 2 (f16) bytes per element:
//     pool[(((page * numLayers + layer) * 2 + kv) * pageSize + slot) * kvDim + i]
//   q8_0: rows of numKvHeads * (headDim + 2 * ceil(headDim / 32)) bytes (core/kv-view.ts's Q8_0
//   LAYOUT: per head, blocks of an f16 scale and 32 int8) in place of kvDim elements.
import { expF32x4, f16x4SignedToF32, hsum, hsum4 } from './simd';

/** Elements [i, i + 4) of a row of T (f32, or u16: halves) as f32x4. */
@inline
function load4<T>(row: usize, i: usize): v128 {
  if (sizeof<T>() == 2) return f16x4SignedToF32(v128.load16x4_s(row + (i << 1)));
  return v128.load(row + (i << 2));
}

/** Element i of a row of T as f32. */
@inline
function load1<T>(row: usize, i: usize): f32 {
  if (sizeof<T>() == 2) return f32x4.extract_lane(f16x4SignedToF32(i32x4.splat(<i32>load<i16>(row + (i << 1)))), 0);
  return load<f32>(row + (i << 2));
}

@inline
function dotTail<T>(q: usize, k: usize, from: usize, n: usize, s: f32): f32 {
  for (let i = from; i < n; i++) s += load<f32>(q + (i << 2)) * load1<T>(k, i);
  return s;
}

/** scores[j] = scale * q·K[j] for the slots [0, count) of one page; K rows at stride ks bytes. */
function pageScores<T>(q: usize, k: usize, ks: usize, count: i32, headDim: i32, scale: f32, scores: usize): void {
  const n = <usize>headDim;
  const n4 = <usize>(headDim & ~3);
  const sv = f32x4.splat(scale);
  let j = 0;
  for (; j + 4 <= count; j += 4) {
    const k0 = k + <usize>j * ks, k1 = k0 + ks, k2 = k1 + ks, k3 = k2 + ks;
    let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
    for (let i: usize = 0; i < n4; i += 4) {
      const qv = v128.load(q + (i << 2));
      a0 = f32x4.add(a0, f32x4.mul(qv, load4<T>(k0, i)));
      a1 = f32x4.add(a1, f32x4.mul(qv, load4<T>(k1, i)));
      a2 = f32x4.add(a2, f32x4.mul(qv, load4<T>(k2, i)));
      a3 = f32x4.add(a3, f32x4.mul(qv, load4<T>(k3, i)));
    }
    let s = hsum4(a0, a1, a2, a3);
    if (n4 < n) {
      s = f32x4.replace_lane(s, 0, dotTail<T>(q, k0, n4, n, f32x4.extract_lane(s, 0)));
      s = f32x4.replace_lane(s, 1, dotTail<T>(q, k1, n4, n, f32x4.extract_lane(s, 1)));
      s = f32x4.replace_lane(s, 2, dotTail<T>(q, k2, n4, n, f32x4.extract_lane(s, 2)));
      s = f32x4.replace_lane(s, 3, dotTail<T>(q, k3, n4, n, f32x4.extract_lane(s, 3)));
    }
    v128.store(scores + (<usize>j << 2), f32x4.mul(s, sv));
  }
  for (; j < count; j++) {
    const kj = k + <usize>j * ks;
    let a = f32x4.splat(0);
    for (let i: usize = 0; i < n4; i += 4) a = f32x4.add(a, f32x4.mul(v128.load(q + (i << 2)), load4<T>(kj, i)));
    store<f32>(scores + (<usize>j << 2), dotTail<T>(q, kj, n4, n, hsum(a)) * scale);
  }
}

/**
 * In place: scores[p] = exp(scores[p] - max); returns the sum. With a sink (sinks != 0: gpt-oss's
 * learned logit of this head) the max takes it in and the sum adds its exp(sink - max).
 */
function softmaxNumerators(scores: usize, n: i32, sinks: usize, h: i32): f32 {
  let max = -Infinity as f32;
  for (let p = 0; p < n; p++) max = Mathf.max(max, load<f32>(scores + (<usize>p << 2)));
  const sink = sinks == 0 ? (-Infinity as f32) : load<f32>(sinks + (<usize>h << 2));
  if (sinks != 0) max = Mathf.max(max, sink);
  const mv = f32x4.splat(max);
  let acc = f32x4.splat(0);
  let p = 0;
  for (; p + 4 <= n; p += 4) {
    const at = scores + (<usize>p << 2);
    const e = expF32x4(f32x4.sub(v128.load(at), mv));
    v128.store(at, e);
    acc = f32x4.add(acc, e);
  }
  let sum = hsum(acc);
  for (; p < n; p++) {
    const at = scores + (<usize>p << 2);
    const e = f32x4.extract_lane(expF32x4(f32x4.splat(load<f32>(at) - max)), 0);
    store<f32>(at, e);
    sum += e;
  }
  if (sinks != 0) sum += f32x4.extract_lane(expF32x4(f32x4.splat(sink - max)), 0);
  return sum;
}

/** out[0..headDim) += Σ_j w[j] * V[j] over one page's slots, in slot order; V rows at stride vs. */
function pageValues<T>(w: usize, v: usize, vs: usize, count: i32, headDim: i32, out: usize): void {
  const n = <usize>headDim;
  const n4 = <usize>(headDim & ~3);
  let i: usize = 0;
  for (; i + 32 <= n4; i += 32) {
    const oo = out + (i << 2);
    let a0 = v128.load(oo), a1 = v128.load(oo, 16), a2 = v128.load(oo, 32), a3 = v128.load(oo, 48);
    let a4 = v128.load(oo, 64), a5 = v128.load(oo, 80), a6 = v128.load(oo, 96), a7 = v128.load(oo, 112);
    for (let j = 0; j < count; j++) {
      const wj = f32x4.splat(load<f32>(w + (<usize>j << 2)));
      const vj = v + <usize>j * vs;
      a0 = f32x4.add(a0, f32x4.mul(wj, load4<T>(vj, i)));
      a1 = f32x4.add(a1, f32x4.mul(wj, load4<T>(vj, i + 4)));
      a2 = f32x4.add(a2, f32x4.mul(wj, load4<T>(vj, i + 8)));
      a3 = f32x4.add(a3, f32x4.mul(wj, load4<T>(vj, i + 12)));
      a4 = f32x4.add(a4, f32x4.mul(wj, load4<T>(vj, i + 16)));
      a5 = f32x4.add(a5, f32x4.mul(wj, load4<T>(vj, i + 20)));
      a6 = f32x4.add(a6, f32x4.mul(wj, load4<T>(vj, i + 24)));
      a7 = f32x4.add(a7, f32x4.mul(wj, load4<T>(vj, i + 28)));
    }
    v128.store(oo, a0); v128.store(oo, a1, 16); v128.store(oo, a2, 32); v128.store(oo, a3, 48);
    v128.store(oo, a4, 64); v128.store(oo, a5, 80); v128.store(oo, a6, 96); v128.store(oo, a7, 112);
  }
  for (; i < n4; i += 4) {
    let a = v128.load(out + (i << 2));
    for (let j = 0; j < count; j++) a = f32x4.add(a, f32x4.mul(f32x4.splat(load<f32>(w + (<usize>j << 2))), load4<T>(v + <usize>j * vs, i)));
    v128.store(out + (i << 2), a);
  }
  for (; i < n; i++) {
    let a = load<f32>(out + (i << 2));
    for (let j = 0; j < count; j++) a += load<f32>(w + (<usize>j << 2)) * load1<T>(v + <usize>j * vs, i);
    store<f32>(out + (i << 2), a);
  }
}

/**
 * out[t, h] = softmax(scale * q[t, h] · K[lo..n)) · V[lo..n) for n = startPos + t + 1, with head
 * h reading KV head floor(h * numKvHeads / numHeads); lo = 0, or with window > 0 (a sliding
 * window) max(0, n - window). Page-major: each page's K plane (every KV head's rows: one
 * contiguous stretch of the pool) is scored by every query head while it is in L1, then, after
 * the softmax, each V plane likewise; each (token, head) still sums in the order of the
 * head-major loop this replaced (page by page, slot by slot), so the outputs are the same bits.
 * An f16 pool's planes are first promoted to f32 exactly into `rows`, runs of four whole pages
 * together, interleaved, so four memory streams are in flight at once: at a 2k context pages are
 * scattered 8+ KiB stretches, and one stream at a time left the kernel waiting on memory
 * (measured on m100's shape, caches cold: 1.3x faster than one page at a time, 2x faster than
 * the KV-head-major order it replaced); an f32 pool's planes are read where they lie.
 *   scores: one stretch of `stride` floats per query head (stride >= startPos + numTokens + 1, a
 *     multiple of 4), indexed by position, its last float holding 1 / sum;
 *   rows (f16 only): 4 * pageSize * numKvHeads * headDim floats of scratch.
 */
@inline
function pageMajorAttention<T>(
  pool: usize, numLayers: i32, pageSize: i32, numKvHeads: i32, headDim: i32, layer: i32,
  pageTable: usize, q: usize, out: usize, numTokens: i32, startPos: i32, numHeads: i32, scale: f32, scores: usize,
  stride: i32, rows: usize, window: i32, sinks: usize,
): void {
  const kvDim = numKvHeads * headDim;
  const rowBytes = sizeof<T>() == 1
    ? <usize>numKvHeads * <usize>(headDim + 2 * ((headDim + 31) >> 5))
    : <usize>kvDim * sizeof<T>();
  const planeBytes = <usize>pageSize * rowBytes;
  const pageStride = <usize>numLayers * 2 * planeBytes; // from one page's plane to the next page's
  const rowBytes32 = <usize>kvDim << 2; // of a row as scored (f32)
  const rowsPageBytes = <usize>pageSize * rowBytes32;
  const headBytes = <usize>headDim << 2;
  const scoreBytes = <usize>stride << 2;
  for (let t = 0; t < numTokens; t++) {
    const n = startPos + t + 1;
    const lo = window > 0 ? max(0, n - window) : 0;
    const numPages = (n + pageSize - 1) / pageSize;
    const firstPage = lo / pageSize;
    for (let kv = 0; kv < 2; kv++) {
      const plane = pool + <usize>(layer * 2 + kv) * planeBytes; // of page 0
      let pi = firstPage;
      while (pi < numPages) {
        // f16: four whole pages promoted together, or one (maybe cut by the window or the causal limit).
        const whole4 = sizeof<T>() == 2 && lo <= pi * pageSize && (pi + 4) * pageSize <= n;
        const at = pageTable + (<usize>pi << 2);
        if (whole4) {
          promoteSpans4(
            plane + <usize>load<i32>(at) * pageStride, plane + <usize>load<i32>(at, 4) * pageStride,
            plane + <usize>load<i32>(at, 8) * pageStride, plane + <usize>load<i32>(at, 12) * pageStride,
            <usize>pageSize * <usize>kvDim, rows, rowsPageBytes,
          );
        } else if (sizeof<T>() == 2) {
          const from = max(lo, pi * pageSize);
          const count = min((pi + 1) * pageSize, n) - from;
          const src = plane + <usize>load<i32>(at) * pageStride + <usize>(from - pi * pageSize) * rowBytes;
          promoteSpan(src, <usize>count * <usize>kvDim, rows);
        } else if (sizeof<T>() == 1) {
          const from = max(lo, pi * pageSize);
          const count = min((pi + 1) * pageSize, n) - from;
          const src = plane + <usize>load<i32>(at) * pageStride + <usize>(from - pi * pageSize) * rowBytes;
          dequantRowsQ8(src, count * numKvHeads, headDim, rows);
        }
        const np = whole4 ? 4 : 1;
        for (let p = 0; p < np; p++) {
          const from = max(lo, (pi + p) * pageSize);
          const count = min((pi + p + 1) * pageSize, n) - from;
          // The page's rows from slot `from` on, as f32: promoted (f16), or in the pool (f32).
          const pageRows = sizeof<T>() != 4
            ? rows + <usize>p * rowsPageBytes
            : plane + <usize>load<i32>(at + (<usize>p << 2)) * pageStride + <usize>(from - (pi + p) * pageSize) * rowBytes;
          for (let h = 0; h < numHeads; h++) {
            const headRows = pageRows + <usize>((h * numKvHeads) / numHeads) * headBytes;
            const sh = scores + <usize>h * scoreBytes + (<usize>from << 2);
            const qo = <usize>(t * numHeads + h) * headBytes; // of this head's q and out
            if (kv == 0) pageScores<f32>(q + qo, headRows, rowBytes32, count, headDim, scale, sh);
            else pageValues<f32>(sh, headRows, rowBytes32, count, headDim, out + qo);
          }
        }
        pi += np;
      }
      if (kv == 0) {
        for (let h = 0; h < numHeads; h++) {
          const sh = scores + <usize>h * scoreBytes;
          store<f32>(sh + (<usize>(stride - 1) << 2), <f32>1 / softmaxNumerators(sh + (<usize>lo << 2), n - lo, sinks, h)); // the last float: 1 / sum
        }
        memory.fill(out + <usize>(t * numHeads) * headBytes, 0, <usize>numHeads * headBytes);
      }
    }
    for (let h = 0; h < numHeads; h++) {
      const inverseSum = load<f32>(scores + <usize>h * scoreBytes + (<usize>(stride - 1) << 2));
      const oh = out + <usize>(t * numHeads + h) * headBytes;
      const iv = f32x4.splat(inverseSum);
      const n4 = <usize>(headDim & ~3) << 2;
      for (let o: usize = 0; o < n4; o += 16) v128.store(oh + o, f32x4.mul(v128.load(oh + o), iv));
      for (let o = n4; o < headBytes; o += 4) store<f32>(oh + o, load<f32>(oh + o) * inverseSum);
    }
  }
}

/** Attention over an f32 pool (window 0: none; sinks 0: none, else [numHeads] f32); scores as pageMajorAttention's. */
export function attention(
  pool: usize, numLayers: i32, pageSize: i32, numKvHeads: i32, headDim: i32, layer: i32,
  pageTable: usize, q: usize, out: usize, numTokens: i32, startPos: i32, numHeads: i32, scale: f32, scores: usize,
  stride: i32, window: i32, sinks: usize,
): void {
  pageMajorAttention<f32>(
    pool, numLayers, pageSize, numKvHeads, headDim, layer,
    pageTable, q, out, numTokens, startPos, numHeads, scale, scores, stride, 0, window, sinks,
  );
}

/**
 * Attention over an f16 pool (elements are half bit patterns): the same sums as over an f32 pool
 * for every (token, head), over the pool's values promoted to f32 exactly, so the outputs are
 * bit-identical to attention over an f32 pool holding those values (pageMajorAttention).
 */
export function attentionF16(
  pool: usize, numLayers: i32, pageSize: i32, numKvHeads: i32, headDim: i32, layer: i32,
  pageTable: usize, q: usize, out: usize, numTokens: i32, startPos: i32, numHeads: i32, scale: f32, scores: usize,
  stride: i32, rows: usize, window: i32, sinks: usize,
): void {
  pageMajorAttention<u16>(
    pool, numLayers, pageSize, numKvHeads, headDim, layer,
    pageTable, q, out, numTokens, startPos, numHeads, scale, scores, stride, rows, window, sinks,
  );
}

/**
 * Attention over a q8_0 pool: each page's plane dequantized (dequantRowsQ8) into `rows` (one
 * page: pageSize * numKvHeads * headDim floats), then the f32 sums of pageMajorAttention.
 */
export function attentionQ8(
  pool: usize, numLayers: i32, pageSize: i32, numKvHeads: i32, headDim: i32, layer: i32,
  pageTable: usize, q: usize, out: usize, numTokens: i32, startPos: i32, numHeads: i32, scale: f32, scores: usize,
  stride: i32, rows: usize, window: i32, sinks: usize,
): void {
  pageMajorAttention<u8>(
    pool, numLayers, pageSize, numKvHeads, headDim, layer,
    pageTable, q, out, numTokens, startPos, numHeads, scale, scores, stride, rows, window, sinks,
  );
}

/**
 * numHeadRows contiguous q8_0 head rows at src (headDim values each: blocks of an f16 scale and
 * up to 32 int8) -> numHeadRows * headDim f32 at dst, each d * qs (exact in f32).
 */
function dequantRowsQ8(src: usize, numHeadRows: i32, headDim: i32, dst: usize): void {
  for (let r = 0; r < numHeadRows; r++) {
    for (let b = 0; b < headDim; b += 32) {
      const n = min(32, headDim - b);
      const d = f32x4.extract_lane(f16x4SignedToF32(i32x4.splat(<i32>load<i16>(src))), 0);
      const ds = f32x4.splat(d);
      const qs = src + 2;
      let i = 0;
      for (; i + 8 <= n; i += 8) {
        const w = v128.load8x8_s(qs + <usize>i);
        const o = dst + (<usize>(b + i) << 2);
        v128.store(o, f32x4.mul(ds, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(w))));
        v128.store(o, f32x4.mul(ds, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(w))), 16);
      }
      for (; i < n; i++) store<f32>(dst + (<usize>(b + i) << 2), d * <f32>load<i8>(qs + <usize>i));
      src += 2 + <usize>n;
    }
    dst += <usize>headDim << 2;
  }
}

/** n contiguous halves at src -> n f32 at dst, exactly (f16x4SignedToF32). */
function promoteSpan(src: usize, n: usize, dst: usize): void {
  let i: usize = 0;
  for (; i + 8 <= n; i += 8) {
    v128.store(dst + (i << 2), f16x4SignedToF32(v128.load16x4_s(src + (i << 1))));
    v128.store(dst + (i << 2), f16x4SignedToF32(v128.load16x4_s(src + (i << 1), 8)), 16);
  }
  for (; i + 4 <= n; i += 4) v128.store(dst + (i << 2), load4<u16>(src, i));
  for (; i < n; i++) store<f32>(dst + (i << 2), load1<u16>(src, i));
}

/** promoteSpan of four spans at once, interleaved (four memory streams), to dst + p * dstStride. */
function promoteSpans4(s0: usize, s1: usize, s2: usize, s3: usize, n: usize, dst: usize, dstStride: usize): void {
  const d1 = dst + dstStride, d2 = d1 + dstStride, d3 = d2 + dstStride;
  let i: usize = 0;
  for (; i + 8 <= n; i += 8) {
    const h = i << 1, f = i << 2;
    const a0 = v128.load16x4_s(s0 + h), a1 = v128.load16x4_s(s0 + h, 8);
    const b0 = v128.load16x4_s(s1 + h), b1 = v128.load16x4_s(s1 + h, 8);
    const c0 = v128.load16x4_s(s2 + h), c1 = v128.load16x4_s(s2 + h, 8);
    const e0 = v128.load16x4_s(s3 + h), e1 = v128.load16x4_s(s3 + h, 8);
    v128.store(dst + f, f16x4SignedToF32(a0));
    v128.store(dst + f, f16x4SignedToF32(a1), 16);
    v128.store(d1 + f, f16x4SignedToF32(b0));
    v128.store(d1 + f, f16x4SignedToF32(b1), 16);
    v128.store(d2 + f, f16x4SignedToF32(c0));
    v128.store(d2 + f, f16x4SignedToF32(c1), 16);
    v128.store(d3 + f, f16x4SignedToF32(e0));
    v128.store(d3 + f, f16x4SignedToF32(e1), 16);
  }
  if (i < n) {
    promoteSpan(s0 + (i << 1), n - i, dst + (i << 2));
    promoteSpan(s1 + (i << 1), n - i, d1 + (i << 2));
    promoteSpan(s2 + (i << 1), n - i, d2 + (i << 2));
    promoteSpan(s3 + (i << 1), n - i, d3 + (i << 2));
  }
}

/**
 * dst[i] = the f16 nearest src[i] (ties to even; overflow to inf, nan stays nan), for i < n:
 * what an f16 pool stores when K and V are written; the rounding of src/kernels/half.ts, four
 * lanes at a time (F. Giesen's float_to_half_fast3_rtne: every case computed, then selected).
 */
export function f32ToF16Row(src: usize, dst: usize, n: i32): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const h = f32x4ToF16(v128.load(src + (<usize>i << 2)));
    // The low two bytes of each lane, packed into the low 8 bytes.
    const packed = v128.shuffle<u8>(h, h, 0, 1, 4, 5, 8, 9, 12, 13, 0, 1, 4, 5, 8, 9, 12, 13);
    v128.store64_lane(dst + (<usize>i << 1), packed, 0);
  }
  for (; i < n; i++) {
    const h = f32x4ToF16(v128.load32_zero(src + (<usize>i << 2)));
    store<u16>(dst + (<usize>i << 1), <u16>i32x4.extract_lane(h, 0));
  }
}

/** Four f32 -> four f16 bit patterns (in the low 16 bits of each i32 lane), round to nearest even. */
@inline
export function f32x4ToF16(x: v128): v128 {
  const sign = v128.and(x, i32x4.splat(0x80000000));
  const f = v128.xor(x, sign);
  // |x| >= 65520 (rounds past the largest half) or inf / nan.
  const big = i32x4.ge_u(f, i32x4.splat((127 + 16) << 23));
  const nan = i32x4.gt_u(f, i32x4.splat(255 << 23));
  const special = v128.bitselect(i32x4.splat(0x7e00), i32x4.splat(0x7c00), nan);
  // |x| < 2^-14: subnormal halves (and zero), rounded by the f32 adder.
  const small = i32x4.lt_u(f, i32x4.splat(113 << 23));
  const magic = i32x4.splat(((127 - 15) + (23 - 10) + 1) << 23);
  const sub = i32x4.sub(f32x4.add(f, magic), magic);
  // Normal halves: rebias the exponent, add the rounding bias (0xfff plus the odd bit), shift.
  const odd = v128.and(i32x4.shr_u(f, 13), i32x4.splat(1));
  const norm = i32x4.shr_u(i32x4.add(i32x4.add(f, i32x4.splat(((15 - 127) << 23) + 0xfff)), odd), 13);
  const magnitude = v128.bitselect(special, v128.bitselect(sub, norm, small), big);
  return v128.or(magnitude, i32x4.shr_u(sign, 16));
}
