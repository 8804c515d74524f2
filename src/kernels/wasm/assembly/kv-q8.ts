// Quantizing K and V rows into a q8_0 KV pool (core/kv-view.ts's Q8_0 LAYOUT), the wasm twin of
// src/kernels/q8-kv.ts's quantizeKvRow: the same f32 arithmetic, so the same bytes (tested
// byte for byte against it). Per block of up to 32 values of a head: d = max|x| / 127,
// qs = roundf(x * (1 / d)) (half away from zero), d stored as f16 (round to nearest even); a block
// holding a nan or an infinity stores d = 0x7e00 (nan) and zero qs; a block whose 1 / d overflows
// stores zero qs. Writes only the rows it is
// given; never reads past src's numHeadRows * headDim floats.
import { f32x4ToF16 } from './attention';

/**
 * numHeadRows head rows of headDim f32 at src -> numHeadRows q8_0 head rows at dst, back to back
 * (headDim + 2 * ceil(headDim / 32) bytes each).
 */
export function quantizeRowsQ8(src: usize, numHeadRows: i32, headDim: i32, dst: usize): void {
  for (let r = 0; r < numHeadRows; r++) {
    for (let b = 0; b < headDim; b += 32) {
      const n = min(32, headDim - b);
      const x = src + (<usize>b << 2);
      let amax: f32 = 0;
      let finite = true;
      for (let i = 0; i < n; i++) {
        const a = Mathf.abs(load<f32>(x + (<usize>i << 2)));
        if (a <= F32.MAX_VALUE) amax = Mathf.max(amax, a);
        else finite = false; // inf or nan
      }
      if (!finite) {
        store<u16>(dst, 0x7e00);
        memory.fill(dst + 2, 0, <usize>n);
      } else {
        const d: f32 = amax / <f32>127;
        const id: f32 = d == 0 ? <f32>0 : <f32>1 / d;
        store<u16>(dst, <u16>i32x4.extract_lane(f32x4ToF16(f32x4.splat(d)), 0));
        // A block so small that 1 / d overflows (max|x| < ~4e-37) stores zeros, as the TS twin
        // does (its inf and nan products fold to 0); d is then an f16 zero anyway.
        if (!(id <= F32.MAX_VALUE)) memory.fill(dst + 2, 0, <usize>n);
        else for (let i = 0; i < n; i++) {
          const y: f32 = load<f32>(x + (<usize>i << 2)) * id;
          let q: f32 = Mathf.trunc(y);
          if (Mathf.abs(y - q) >= <f32>0.5) q += y < 0 ? <f32>-1 : <f32>1;
          store<i8>(dst + 2 + <usize>i, <i8><i32>q);
        }
      }
      dst += 2 + <usize>n;
    }
    src += <usize>headDim << 2;
  }
}
