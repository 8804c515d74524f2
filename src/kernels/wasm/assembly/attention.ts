// Paged causal attention with GQA for one request in one layer. Reads K and V only through the
// page table it is given and only positions [0, startPos + t] for query token t (with a sliding
// window, only the last `window` of them); it never
// checks ownership (the caller verified every page). Each (token, head) is computed by the same
// arithmetic whatever numTokens is, so chunked prefill and decode give bit-identical outputs.
//
//   pool layout (page-major, see src/kernels/types.ts):
//     pool[(((page * numLayers + layer) * 2 + kv) * pageSize + slot) * kvDim + i]
import { expF32x4, hsum, hsum4 } from './simd';

@inline
function dotTail(q: usize, k: usize, from: usize, bytes: usize, s: f32): f32 {
  for (let o = from; o < bytes; o += 4) s += load<f32>(q + o) * load<f32>(k + o);
  return s;
}

/** scores[j] = scale * q·K[j] for the slots [0, count) of one page; K rows at stride ks bytes. */
function pageScores(q: usize, k: usize, ks: usize, count: i32, headDim: i32, scale: f32, scores: usize): void {
  const bytes = <usize>headDim << 2;
  const n4 = <usize>(headDim & ~3) << 2;
  const sv = f32x4.splat(scale);
  let j = 0;
  for (; j + 4 <= count; j += 4) {
    const k0 = k + <usize>j * ks, k1 = k0 + ks, k2 = k1 + ks, k3 = k2 + ks;
    let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
    for (let o: usize = 0; o < n4; o += 16) {
      const qv = v128.load(q + o);
      a0 = f32x4.add(a0, f32x4.mul(qv, v128.load(k0 + o)));
      a1 = f32x4.add(a1, f32x4.mul(qv, v128.load(k1 + o)));
      a2 = f32x4.add(a2, f32x4.mul(qv, v128.load(k2 + o)));
      a3 = f32x4.add(a3, f32x4.mul(qv, v128.load(k3 + o)));
    }
    let s = hsum4(a0, a1, a2, a3);
    if (n4 < bytes) {
      s = f32x4.replace_lane(s, 0, dotTail(q, k0, n4, bytes, f32x4.extract_lane(s, 0)));
      s = f32x4.replace_lane(s, 1, dotTail(q, k1, n4, bytes, f32x4.extract_lane(s, 1)));
      s = f32x4.replace_lane(s, 2, dotTail(q, k2, n4, bytes, f32x4.extract_lane(s, 2)));
      s = f32x4.replace_lane(s, 3, dotTail(q, k3, n4, bytes, f32x4.extract_lane(s, 3)));
    }
    v128.store(scores + (<usize>j << 2), f32x4.mul(s, sv));
  }
  for (; j < count; j++) {
    const kj = k + <usize>j * ks;
    let a = f32x4.splat(0);
    for (let o: usize = 0; o < n4; o += 16) a = f32x4.add(a, f32x4.mul(v128.load(q + o), v128.load(kj + o)));
    store<f32>(scores + (<usize>j << 2), dotTail(q, kj, n4, bytes, hsum(a)) * scale);
  }
}

/** In place: scores[p] = exp(scores[p] - max); returns the sum. */
function softmaxNumerators(scores: usize, n: i32): f32 {
  let max = -Infinity as f32;
  for (let p = 0; p < n; p++) max = Mathf.max(max, load<f32>(scores + (<usize>p << 2)));
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
  return sum;
}

/** out[0..headDim) += Σ_j w[j] * V[j] over one page's slots, in slot order; V rows at stride vs. */
function pageValues(w: usize, v: usize, vs: usize, count: i32, headDim: i32, out: usize): void {
  const n4 = <usize>(headDim & ~3) << 2;
  let o: usize = 0;
  for (; o + 128 <= n4; o += 128) {
    const oo = out + o;
    let a0 = v128.load(oo), a1 = v128.load(oo, 16), a2 = v128.load(oo, 32), a3 = v128.load(oo, 48);
    let a4 = v128.load(oo, 64), a5 = v128.load(oo, 80), a6 = v128.load(oo, 96), a7 = v128.load(oo, 112);
    for (let j = 0; j < count; j++) {
      const wj = f32x4.splat(load<f32>(w + (<usize>j << 2)));
      const vj = v + <usize>j * vs + o;
      a0 = f32x4.add(a0, f32x4.mul(wj, v128.load(vj)));
      a1 = f32x4.add(a1, f32x4.mul(wj, v128.load(vj, 16)));
      a2 = f32x4.add(a2, f32x4.mul(wj, v128.load(vj, 32)));
      a3 = f32x4.add(a3, f32x4.mul(wj, v128.load(vj, 48)));
      a4 = f32x4.add(a4, f32x4.mul(wj, v128.load(vj, 64)));
      a5 = f32x4.add(a5, f32x4.mul(wj, v128.load(vj, 80)));
      a6 = f32x4.add(a6, f32x4.mul(wj, v128.load(vj, 96)));
      a7 = f32x4.add(a7, f32x4.mul(wj, v128.load(vj, 112)));
    }
    v128.store(oo, a0); v128.store(oo, a1, 16); v128.store(oo, a2, 32); v128.store(oo, a3, 48);
    v128.store(oo, a4, 64); v128.store(oo, a5, 80); v128.store(oo, a6, 96); v128.store(oo, a7, 112);
  }
  for (; o < n4; o += 16) {
    let a = v128.load(out + o);
    for (let j = 0; j < count; j++) a = f32x4.add(a, f32x4.mul(f32x4.splat(load<f32>(w + (<usize>j << 2))), v128.load(v + <usize>j * vs + o)));
    v128.store(out + o, a);
  }
  for (; o < (<usize>headDim << 2); o += 4) {
    let a = load<f32>(out + o);
    for (let j = 0; j < count; j++) a += load<f32>(w + (<usize>j << 2)) * load<f32>(v + <usize>j * vs + o);
    store<f32>(out + o, a);
  }
}

/**
 * out[t, h] = softmax(scale * q[t, h] · K[lo..startPos+t]) · V[lo..startPos+t], with head h
 * reading KV head floor(h * numKvHeads / numHeads); lo = 0, or with window > 0 (a sliding
 * window) max(0, startPos + t + 1 - window). scores: scratch of startPos + numTokens floats,
 * indexed by position.
 */
export function attention(
  pool: usize, numLayers: i32, pageSize: i32, numKvHeads: i32, headDim: i32, layer: i32,
  pageTable: usize, q: usize, out: usize, numTokens: i32, startPos: i32, numHeads: i32, scale: f32, scores: usize,
  window: i32,
): void {
  const kvDim = numKvHeads * headDim;
  const rowBytes = <usize>kvDim << 2;
  const planeBytes = <usize>pageSize * rowBytes; // one page's K (or V) of one layer
  const headBytes = <usize>headDim << 2;
  for (let t = 0; t < numTokens; t++) {
    const n = startPos + t + 1;
    const lo = window > 0 ? max(0, n - window) : 0;
    const numPages = (n + pageSize - 1) / pageSize;
    const firstPage = lo / pageSize;
    for (let h = 0; h < numHeads; h++) {
      const kvHeadAt = <usize>((h * numKvHeads) / numHeads) * headBytes;
      const qh = q + <usize>(t * numHeads + h) * headBytes;
      const oh = out + <usize>(t * numHeads + h) * headBytes;
      for (let pi = firstPage; pi < numPages; pi++) {
        const page = <usize>load<i32>(pageTable + (<usize>pi << 2));
        const from = max(lo, pi * pageSize); // first position read in this page
        const k = pool + ((page * numLayers + layer) * 2) * planeBytes + kvHeadAt + <usize>(from - pi * pageSize) * rowBytes;
        pageScores(qh, k, rowBytes, min((pi + 1) * pageSize, n) - from, headDim, scale, scores + (<usize>from << 2));
      }
      const inverseSum = <f32>1 / softmaxNumerators(scores + (<usize>lo << 2), n - lo);
      memory.fill(oh, 0, headBytes);
      for (let pi = firstPage; pi < numPages; pi++) {
        const page = <usize>load<i32>(pageTable + (<usize>pi << 2));
        const from = max(lo, pi * pageSize);
        const v = pool + ((page * numLayers + layer) * 2 + 1) * planeBytes + kvHeadAt + <usize>(from - pi * pageSize) * rowBytes;
        pageValues(scores + (<usize>from << 2), v, rowBytes, min((pi + 1) * pageSize, n) - from, headDim, oh);
      }
      const iv = f32x4.splat(inverseSum);
      const n4 = <usize>(headDim & ~3) << 2;
      for (let o: usize = 0; o < n4; o += 16) v128.store(oh + o, f32x4.mul(v128.load(oh + o), iv));
      for (let o = n4; o < headBytes; o += 4) store<f32>(oh + o, load<f32>(oh + o) * inverseSum);
    }
  }
}
