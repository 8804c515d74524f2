import { describe, expect, it } from 'vitest';
import { Rng } from '../core/index.js';
import { dequantize, f16ToF32, f32ToF16, quantize } from './formats.js';
import { K_BLOCK_BYTES, QK_K, type KQuant } from './kquants.js';

// ggml's dequantize_row_q4_K / q5_K / q6_K (ggml-quants.c), transcribed line by line with the
// C pointer walks kept, as the oracle for kquants.ts's decoder (written differently, from the
// struct layout). f32 arithmetic as in C: Math.fround after every operation.
const f = Math.fround;
const f16 = (b: Uint8Array, at: number): number => f16ToF32(b[at]! | (b[at + 1]! << 8));

function getScaleMinK4(j: number, q: Uint8Array): [number, number] {
  if (j < 4) return [q[j]! & 63, q[j + 4]! & 63];
  return [(q[j + 4]! & 0xf) | ((q[j - 4]! >> 6) << 4), (q[j + 4]! >> 4) | ((q[j - 0]! >> 6) << 4)];
}

function ggmlDequantize(type: KQuant, x: Uint8Array, nb: number): Float32Array {
  const y = new Float32Array(nb * QK_K);
  let yi = 0;
  for (let i = 0; i < nb; i++) {
    const blk = x.subarray(i * K_BLOCK_BYTES[type], (i + 1) * K_BLOCK_BYTES[type]);
    if (type === 'q6_k') {
      const d = f16(blk, 208);
      let ql = 0;
      let qh = 128;
      let sc = 192;
      for (let n = 0; n < QK_K; n += 128) {
        for (let l = 0; l < 32; ++l) {
          const is = (l / 16) | 0;
          const q1 = ((blk[ql + l]! & 0xf) | (((blk[qh + l]! >> 0) & 3) << 4)) - 32;
          const q2 = ((blk[ql + l + 32]! & 0xf) | (((blk[qh + l]! >> 2) & 3) << 4)) - 32;
          const q3 = ((blk[ql + l]! >> 4) | (((blk[qh + l]! >> 4) & 3) << 4)) - 32;
          const q4 = ((blk[ql + l + 32]! >> 4) | (((blk[qh + l]! >> 6) & 3) << 4)) - 32;
          const s = (k: number): number => (blk[sc + is + k]! << 24) >> 24;
          y[yi + l + 0] = f(f(d * s(0)) * q1);
          y[yi + l + 32] = f(f(d * s(2)) * q2);
          y[yi + l + 64] = f(f(d * s(4)) * q3);
          y[yi + l + 96] = f(f(d * s(6)) * q4);
        }
        yi += 128;
        ql += 64;
        qh += 32;
        sc += 8;
      }
      continue;
    }
    const d = f16(blk, 0);
    const min = f16(blk, 2);
    const scales = blk.subarray(4, 16);
    let q = type === 'q5_k' ? 48 : 16;
    let is = 0;
    let u1 = 1;
    let u2 = 2;
    for (let j = 0; j < QK_K; j += 64) {
      let [sc, m] = getScaleMinK4(is + 0, scales);
      const d1 = f(d * sc);
      const m1 = f(min * m);
      [sc, m] = getScaleMinK4(is + 1, scales);
      const d2 = f(d * sc);
      const m2 = f(min * m);
      const hb = (l: number, u: number): number => (type === 'q5_k' && blk[16 + l]! & u ? 16 : 0);
      for (let l = 0; l < 32; ++l) y[yi++] = f(f(d1 * ((blk[q + l]! & 0xf) + hb(l, u1))) - m1);
      for (let l = 0; l < 32; ++l) y[yi++] = f(f(d2 * ((blk[q + l]! >> 4) + hb(l, u2))) - m2);
      q += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
  return y;
}

/** Random bytes are a valid block once its f16 fields are finite: set them to random normals. */
function randomBlocks(rng: Rng, type: KQuant, nb: number): Uint8Array {
  const bytes = new Uint8Array(nb * K_BLOCK_BYTES[type]).map(() => rng.int(256));
  for (let i = 0; i < nb; i++) {
    const fields = type === 'q6_k' ? [208] : [0, 2];
    for (const at of fields) {
      const h = f32ToF16(rng.normal() * 0.01);
      bytes[i * K_BLOCK_BYTES[type] + at] = h & 0xff;
      bytes[i * K_BLOCK_BYTES[type] + at + 1] = h >> 8;
    }
  }
  return bytes;
}

const TYPES: readonly KQuant[] = ['q4_k', 'q5_k', 'q6_k'];

describe('K-quant dequantization', () => {
  it.each(TYPES)('%s: equals ggml dequantize_row, bit for bit, on random blocks', (type) => {
    const rng = new Rng(11);
    const nb = 16;
    const bytes = randomBlocks(rng, type, nb);
    const out = new Float32Array(nb * QK_K);
    dequantize(type, bytes, 0, nb * QK_K, out);
    const expected = ggmlDequantize(type, bytes, nb);
    expect(Buffer.from(out.buffer).equals(Buffer.from(expected.buffer))).toBe(true);
    const part = new Float32Array(2 * QK_K);
    dequantize(type, bytes, 5 * QK_K, 2 * QK_K, part);
    expect([...part]).toEqual([...expected.subarray(5 * QK_K, 7 * QK_K)]);
  });

  it('q4_k: a hand-made block decodes to the values the layout says', () => {
    const b = new Uint8Array(144);
    b.set([0x00, 0x3c, 0x00, 0x38]); // d = 1, dmin = 0.5
    b[4] = 3; // sc[0] = 3
    b[8] = 2; // m[0] = 2
    b[4 + 1] = 0x40 | 1; // sc[1] = 1, top bits of sc[5] = 1 -> sc[5] = 16 | (b[13] & 15)
    b[13] = 0x57; // sc[5] low nibble 7 -> 23, m[5] low nibble 5 (top bits 0) -> 5
    b[16] = 0x4a; // weight 0 (sub-block 0) = 10, weight 32 (sub-block 1) = 4
    b[16 + 2 * 32 + 1] = 0x90; // chunk 2, byte 1: high nibble is weight 2*64 + 32 + 1 = 161 (sub-block 5) = 9
    const out = new Float32Array(256);
    dequantize('q4_k', b, 0, 256, out);
    expect(out[0]).toBe(3 * 10 - 0.5 * 2);
    expect(out[1]).toBe(-1);
    expect(out[32]).toBe(1 * 4);
    expect(out[161]).toBe(23 * 9 - 0.5 * 5);
  });
});

describe('K-quant quantization (gen-model)', () => {
  const rng = new Rng(5);
  const values = Float32Array.from({ length: 4 * QK_K }, () => rng.normal());

  it.each([
    ['q4_k', 15, 32],
    ['q5_k', 31, 32],
    ['q6_k', 31.5, 16],
  ] as const)('%s: reconstructs within about one quantization step of each sub-block', (type, levels, sub) => {
    const out = new Float32Array(values.length);
    dequantize(type, quantize(type, values), 0, values.length, out);
    for (let s = 0; s < values.length / sub; s++) {
      const block = [...values.subarray(s * sub, (s + 1) * sub)];
      const range = type === 'q6_k' ? 2 * Math.max(...block.map(Math.abs)) : Math.max(...block) - Math.min(0, ...block);
      // 6-bit scales and mins (against the super-block's largest) add up to ~half a step more.
      for (let j = 0; j < sub; j++)
        expect(Math.abs(out[s * sub + j]! - block[j]!)).toBeLessThanOrEqual((range / levels) * 1.5 + 1e-3);
    }
    const rms = Math.sqrt(values.reduce((a, v, i) => a + (v - out[i]!) ** 2, 0) / values.length);
    expect(rms).toBeLessThan(type === 'q4_k' ? 0.15 : 0.06);
  });
});
