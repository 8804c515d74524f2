import { describe, expect, it } from 'vitest';
import { Rng } from '../core/index.js';
import { bf16ToF32, dequantize, f16ToF32, f32ToBf16, f32ToF16, quantize } from './formats.js';

describe('f16 and bf16', () => {
  it('round-trips every finite f16 bit pattern exactly', () => {
    for (let h = 0; h < 0x10000; h++) {
      const exp = (h >>> 10) & 0x1f;
      if (exp === 0x1f) continue;
      expect(f32ToF16(f16ToF32(h))).toBe(h === 0x8000 ? 0x8000 : h);
    }
  });

  it('rounds f32 to the nearest f16, ties to even', () => {
    expect(f16ToF32(f32ToF16(1 + 2 ** -11))).toBe(1); // tie -> even (1.0)
    expect(f16ToF32(f32ToF16(1 + 3 * 2 ** -11))).toBe(1 + 2 ** -9); // tie -> even (up)
    expect(f16ToF32(f32ToF16(65520))).toBe(Infinity);
    expect(f16ToF32(f32ToF16(2 ** -24))).toBe(2 ** -24);
  });

  it('rounds f32 to the nearest bf16', () => {
    expect(bf16ToF32(f32ToBf16(1.00390625))).toBe(1); // tie -> even
    expect(bf16ToF32(f32ToBf16(-3.5))).toBe(-3.5);
  });
});

describe('q8_0 and q4_0', () => {
  const rng = new Rng(7);
  const values = Float32Array.from({ length: 256 }, () => rng.normal());

  it('q8_0 reconstructs within half a step of each block scale', () => {
    const out = new Float32Array(256);
    dequantize('q8_0', quantize('q8_0', values), 0, 256, out);
    for (let b = 0; b < 8; b++) {
      const block = values.subarray(b * 32, b * 32 + 32);
      const step = Math.max(...block.map(Math.abs)) / 127;
      for (let j = 0; j < 32; j++)
        expect(Math.abs(out[b * 32 + j]! - block[j]!)).toBeLessThanOrEqual(step * 0.51 + 1e-6);
    }
  });

  it('q4_0 reconstructs within half a step (one step where +7 clamps) and the largest magnitude to f16 precision', () => {
    const out = new Float32Array(256);
    dequantize('q4_0', quantize('q4_0', values), 0, 256, out);
    for (let b = 0; b < 8; b++) {
      const block = values.subarray(b * 32, b * 32 + 32);
      const amax = Math.max(...block.map(Math.abs));
      const step = amax / 8;
      for (let j = 0; j < 32; j++) {
        const err = Math.abs(out[b * 32 + j]! - block[j]!);
        if (Math.abs(block[j]!) === amax) expect(err).toBeLessThanOrEqual(amax * 2 ** -10);
        else if (Math.abs(block[j]! / step) <= 7) expect(err).toBeLessThanOrEqual(step * 0.5 + 1e-3);
        else expect(err).toBeLessThanOrEqual(step + 1e-3);
      }
    }
  });

  it('dequantizes a block-aligned window in the middle of a tensor', () => {
    const all = new Float32Array(256);
    const part = new Float32Array(64);
    const bytes = quantize('q4_0', values);
    dequantize('q4_0', bytes, 0, 256, all);
    dequantize('q4_0', bytes, 128, 64, part);
    expect([...part]).toEqual([...all.subarray(128, 192)]);
  });
});
