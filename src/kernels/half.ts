// IEEE half precision (f16) to and from f32, and the f32 bit reinterpretation they use. Shared
// by formats.ts and kquants.ts (which formats.ts builds on). Never allocates beyond its scratch.

/**
 * Reinterprets between an f32 value and its 32 bits. Conversion loops make one and pass it to
 * every call (no module-level scratch); single calls may omit it.
 */
export class Float32Bits {
  readonly #f32 = new Float32Array(1);
  readonly #u32 = new Uint32Array(this.#f32.buffer);

  bitsOf(value: number): number {
    this.#f32[0] = value;
    return this.#u32[0]!;
  }

  floatOf(bits: number): number {
    this.#u32[0] = bits >>> 0;
    return this.#f32[0]!;
  }
}

/** f32 -> f16 bits, round to nearest even (as F16C's vcvtps2ph does). */
export function f32ToF16(value: number, bits: Float32Bits = new Float32Bits()): number {
  const x = bits.bitsOf(value);
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0); // inf / nan
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow -> inf
  if (e <= 0) {
    if (e < -10) return sign; // underflow -> signed zero
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let h = mant >>> shift;
    if (rest > half || (rest === half && (h & 1) === 1)) h += 1;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h += 1; // may carry into exponent: correct
  return sign | h;
}

/** f16 bits -> f32 (exact). */
export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}
