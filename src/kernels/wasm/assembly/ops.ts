// Element-wise and per-row kernels: RMSNorm, RoPE (rotate-half pairing), SiLU·mul, add, and
// a plain sum used to measure memory bandwidth. Each row's arithmetic depends only on that
// row, never on how many rows share the call. Touches only the ranges it is given.
import { expF32x4, hsum } from './simd';

/** out[r] = x[r] * (1 / sqrt(mean(x[r]^2) + eps)) * weight, for m rows of dim. out may equal x. */
export function rmsNorm(x: usize, weight: usize, eps: f32, m: i32, dim: i32, out: usize): void {
  const bytes = <usize>dim << 2;
  const n4 = <usize>(dim & ~3) << 2;
  for (let r = 0; r < m; r++) {
    const xr = x + <usize>r * bytes, or = out + <usize>r * bytes;
    let acc = f32x4.splat(0);
    for (let o: usize = 0; o < n4; o += 16) {
      const v = v128.load(xr + o);
      acc = f32x4.add(acc, f32x4.mul(v, v));
    }
    let sumSquares = hsum(acc);
    for (let o = n4; o < bytes; o += 4) sumSquares += load<f32>(xr + o) * load<f32>(xr + o);
    const scale = <f32>1 / Mathf.sqrt(sumSquares / <f32>dim + eps);
    const sv = f32x4.splat(scale);
    for (let o: usize = 0; o < n4; o += 16) v128.store(or + o, f32x4.mul(f32x4.mul(v128.load(xr + o), sv), v128.load(weight + o)));
    for (let o = n4; o < bytes; o += 4) store<f32>(or + o, load<f32>(xr + o) * scale * load<f32>(weight + o));
  }
}

/**
 * Rotate x [numTokens, numHeads, headDim] in place. table: scratch of headDim floats
 * (cos then sin of one token, headDim/2 each).
 */
export function rope(x: usize, numTokens: i32, numHeads: i32, headDim: i32, positions: usize, invFreq: usize, attentionFactor: f32, table: usize): void {
  const half = headDim >> 1;
  const halfBytes = <usize>half << 2;
  const h4 = <usize>(half & ~3) << 2;
  const sinAt = table + halfBytes;
  for (let t = 0; t < numTokens; t++) {
    const pos = <f32>load<i32>(positions + (<usize>t << 2));
    for (let i = 0; i < half; i++) {
      const angle = <f64>(pos * load<f32>(invFreq + (<usize>i << 2))); // an f32 product, as in HF
      store<f32>(table + (<usize>i << 2), <f32>(Math.cos(angle) * attentionFactor));
      store<f32>(sinAt + (<usize>i << 2), <f32>(Math.sin(angle) * attentionFactor));
    }
    for (let h = 0; h < numHeads; h++) {
      const a = x + (<usize>(t * numHeads + h) * headDim << 2), b = a + halfBytes;
      for (let o: usize = 0; o < h4; o += 16) {
        const x0 = v128.load(a + o), x1 = v128.load(b + o);
        const c = v128.load(table + o), s = v128.load(sinAt + o);
        v128.store(a + o, f32x4.sub(f32x4.mul(x0, c), f32x4.mul(x1, s)));
        v128.store(b + o, f32x4.add(f32x4.mul(x1, c), f32x4.mul(x0, s)));
      }
      for (let o = h4; o < halfBytes; o += 4) {
        const x0 = load<f32>(a + o), x1 = load<f32>(b + o);
        const c = load<f32>(table + o), s = load<f32>(sinAt + o);
        store<f32>(a + o, x0 * c - x1 * s);
        store<f32>(b + o, x1 * c + x0 * s);
      }
    }
  }
}

@inline
function siluMul4(g: v128, u: v128): v128 {
  const sigmoid = f32x4.div(f32x4.splat(1), f32x4.add(f32x4.splat(1), expF32x4(f32x4.neg(g))));
  return f32x4.mul(f32x4.mul(g, sigmoid), u);
}

/** out[i] = silu(gate[i]) * up[i]; out may equal gate or up. */
export function siluMul(gate: usize, up: usize, out: usize, n: i32): void {
  const bytes = <usize>n << 2;
  const n4 = <usize>(n & ~3) << 2;
  for (let o: usize = 0; o < n4; o += 16) v128.store(out + o, siluMul4(v128.load(gate + o), v128.load(up + o)));
  for (let o = n4; o < bytes; o += 4) {
    store<f32>(out + o, f32x4.extract_lane(siluMul4(f32x4.splat(load<f32>(gate + o)), f32x4.splat(load<f32>(up + o))), 0));
  }
}

@inline
function geluTanhMul4(g: v128, u: v128): v128 {
  // 0.5 g (1 + tanh(z)) = g * sigmoid(2 z), z = sqrt(2/pi) (g + 0.044715 g^3)
  const g3 = f32x4.mul(f32x4.mul(g, g), g);
  const z2 = f32x4.mul(f32x4.splat(<f32>1.5957691216057308), f32x4.add(g, f32x4.mul(f32x4.splat(<f32>0.044715), g3)));
  const sigmoid = f32x4.div(f32x4.splat(1), f32x4.add(f32x4.splat(1), expF32x4(f32x4.neg(z2))));
  return f32x4.mul(f32x4.mul(g, sigmoid), u);
}

/** out[i] = gelu_tanh(gate[i]) * up[i]; out may equal gate or up. */
export function geluTanhMul(gate: usize, up: usize, out: usize, n: i32): void {
  const bytes = <usize>n << 2;
  const n4 = <usize>(n & ~3) << 2;
  for (let o: usize = 0; o < n4; o += 16) v128.store(out + o, geluTanhMul4(v128.load(gate + o), v128.load(up + o)));
  for (let o = n4; o < bytes; o += 4) {
    store<f32>(out + o, f32x4.extract_lane(geluTanhMul4(f32x4.splat(load<f32>(gate + o)), f32x4.splat(load<f32>(up + o))), 0));
  }
}

/** x[i] += y[i] */
export function addInPlace(x: usize, y: usize, n: i32): void {
  const bytes = <usize>n << 2;
  const n4 = <usize>(n & ~3) << 2;
  for (let o: usize = 0; o < n4; o += 16) v128.store(x + o, f32x4.add(v128.load(x + o), v128.load(y + o)));
  for (let o = n4; o < bytes; o += 4) store<f32>(x + o, load<f32>(x + o) + load<f32>(y + o));
}

/** Σ data[0..n) with 8 accumulators: reads every byte once (a memory-bandwidth probe). n % 32 == 0. */
export function sumF32(data: usize, n: i32): f32 {
  const bytes = <usize>n << 2;
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (let o: usize = 0; o < bytes; o += 128) {
    const p = data + o;
    a0 = f32x4.add(a0, v128.load(p)); a1 = f32x4.add(a1, v128.load(p, 16));
    a2 = f32x4.add(a2, v128.load(p, 32)); a3 = f32x4.add(a3, v128.load(p, 48));
    a4 = f32x4.add(a4, v128.load(p, 64)); a5 = f32x4.add(a5, v128.load(p, 80));
    a6 = f32x4.add(a6, v128.load(p, 96)); a7 = f32x4.add(a7, v128.load(p, 112));
  }
  return hsum(f32x4.add(f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, a3)), f32x4.add(f32x4.add(a4, a5), f32x4.add(a6, a7))));
}
