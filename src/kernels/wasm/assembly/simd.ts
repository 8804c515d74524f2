// Small SIMD helpers shared by the AssemblyScript kernels: horizontal sums with one fixed
// pairing (so every kernel reduces a vector the same way), f16 -> f32 conversion, and a
// vectorised exp. Pure functions of their arguments; no memory access beyond what they are given.

/** (v0 + v2) + (v1 + v3): the one horizontal-sum order every kernel uses. */
@inline
export function hsum(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 2)) + (f32x4.extract_lane(v, 1) + f32x4.extract_lane(v, 3));
}

/** Four horizontal sums at once, lane j = hsum(v_j), with exactly hsum's pairing. */
@inline
export function hsum4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = f32x4.add(v128.shuffle<f32>(a, b, 0, 4, 1, 5), v128.shuffle<f32>(a, b, 2, 6, 3, 7)); // a0+a2 b0+b2 a1+a3 b1+b3
  const cd = f32x4.add(v128.shuffle<f32>(c, d, 0, 4, 1, 5), v128.shuffle<f32>(c, d, 2, 6, 3, 7));
  return f32x4.add(v128.shuffle<f32>(ab, cd, 0, 1, 4, 5), v128.shuffle<f32>(ab, cd, 2, 3, 6, 7));
}

/** Four f16 bit patterns (low 16 bits of each i32 lane) to f32, exactly, incl. subnormals, inf, nan. */
@inline
export function f16x4ToF32(h: v128): v128 {
  const magnitude = i32x4.shl(v128.and(h, i32x4.splat(0x7fff)), 13);
  // As f32 bits, magnitude is the value times 2^-112 (normal or subnormal): scale it back.
  let value = f32x4.mul(magnitude, f32x4.splat(5.192296858534828e33));
  const infOrNan = i32x4.eq(v128.and(h, i32x4.splat(0x7c00)), i32x4.splat(0x7c00));
  value = v128.bitselect(v128.or(magnitude, i32x4.splat(0x7f800000)), value, infOrNan);
  return v128.or(value, i32x4.shl(v128.and(h, i32x4.splat(0x8000)), 16));
}

/**
 * Four f16 bit patterns sign-extended to i32 lanes (v128.load16x4_s, i32x4.extend_*_i16x8_s) to
 * f32, exactly for every half: subnormals, signed zeros, inf, nan (payload kept). Seven ops where
 * f16x4ToF32 takes ten: the sign-extension puts the sign in bit 31, so one shift and one mask
 * leave sign | exponent | mantissa in f32's places (the value times 2^-112, normal or
 * subnormal), one multiply scales it back, and exponent 31 (inf / nan) is or-ed up to 255.
 */
@inline
export function f16x4SignedToF32(sx: v128): v128 {
  const value = f32x4.mul(v128.and(i32x4.shl(sx, 13), i32x4.splat(0x8fffe000)), f32x4.splat(5.192296858534828e33));
  const infOrNan = i32x4.eq(v128.and(sx, i32x4.splat(0x7c00)), i32x4.splat(0x7c00));
  return v128.or(value, v128.and(infOrNan, i32x4.splat(0x7f800000)));
}

@inline
export function f16ToF32(h: u32): f32 {
  return f32x4.extract_lane(f16x4ToF32(i32x4.splat(h)), 0);
}

/**
 * e^x for four lanes (Cephes' expf polynomial, relative error ~1e-7). Inputs are clamped to
 * [-87.3, 88.3], so results stay finite and normal: tiny or huge results are off by far less
 * than any tolerance that matters here (softmax weights, SiLU's sigmoid).
 */
@inline
export function expF32x4(x: v128): v128 {
  const xc = f32x4.max(f32x4.min(x, f32x4.splat(88.3)), f32x4.splat(-87.3));
  const n = f32x4.nearest(f32x4.mul(xc, f32x4.splat(1.44269504088896341)));
  let r = f32x4.sub(xc, f32x4.mul(n, f32x4.splat(0.693359375)));
  r = f32x4.sub(r, f32x4.mul(n, f32x4.splat(-2.12194440e-4)));
  let p = f32x4.splat(1.9875691500e-4);
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.3981999507e-3));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(8.3334519073e-3));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(4.1665795894e-2));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.6666665459e-1));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(5.0000001201e-1));
  p = f32x4.add(f32x4.add(f32x4.mul(f32x4.mul(p, r), r), r), f32x4.splat(1));
  const pow2n = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23);
  return f32x4.mul(p, pow2n);
}
