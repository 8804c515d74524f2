// experts.c (a layer's routed experts over GGML q4_0 / q8_0 / q4_K / q6_K stacks in place) against the same
// experts prepared as matrices on NativeDense (repacked, the path every other weight takes): equal
// to float rounding; a token's bits do not depend on the other tokens of the call nor on the
// helper threads; bad sizes and ids throw with nothing written.
import { describe, expect, it } from 'vitest';
import { quantize } from '../formats.js';
import type { HostTensor, WeightDType } from '../types.js';
import { expertStacks, nativeExpertsInPlace } from './experts-native.js';
import { NativeDense, nativeAvailability, type Addon } from './native.js';

const found = nativeAvailability();
const E = 8;
const F = 64;
const D = 96;
const K = 3;

function random(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * 0.5;
  });
}

/** E experts' [rows, cols] views of one [E, rows, cols] stack, as a GGUF's 3-D tensor is split. */
function stack(dtype: WeightDType, rows: number, cols: number, seed: number): HostTensor[] {
  // K-quants' quantizer looks for structure: give each row its own scale so the scales differ.
  const values = random(E * rows * cols, seed);
  for (let r = 0; r < E * rows; r++) for (let c = 0; c < cols; c++) values[r * cols + c]! *= 0.25 + (r % 7) / 4;
  const bytes = quantize(dtype, values);
  const each = bytes.byteLength / E;
  return Array.from({ length: E }, (_, e) => ({
    name: `e${e}`,
    dtype,
    shape: [rows, cols],
    data: bytes.subarray(e * each, (e + 1) * each),
  }));
}

function routing(T: number, seed: number): { ids: Int32Array; weights: Float32Array } {
  const r = random(T * K, seed);
  const ids = new Int32Array(T * K);
  for (let t = 0; t < T; t++) {
    const taken = new Set<number>();
    for (let j = 0; j < K; j++) {
      let e = Math.floor((r[t * K + j]! + 0.5) * E) % E;
      while (taken.has(e)) e = (e + 1) % E;
      taken.add(e);
      ids[t * K + j] = e;
    }
  }
  return { ids, weights: Float32Array.from(r, (v) => 0.2 + Math.abs(v)) };
}

describe.skipIf(!('addon' in found))('experts.c: routed experts in place', () => {
  const addon = (found as { addon: Addon }).addon;

  // gate | up kind, down kind, F, D: a Q4_K_M file's experts are q4_K with down q4_K or q6_K.
  const cases: [WeightDType, WeightDType, number, number][] = [
    ['q4_0', 'q4_0', F, D],
    ['q8_0', 'q8_0', F, D],
    ['q4_k', 'q4_k', 256, 512],
    ['q4_k', 'q6_k', 256, 512],
    ['q6_k', 'q6_k', 256, 256],
  ];
  for (const [dtype, downType, F1, D1] of cases) {
    it(`${dtype} / ${downType}: the mixture equals the experts repacked on NativeDense, to float rounding`, async () => {
      const [gate, up, down] = [stack(dtype, F1, D1, 1), stack(dtype, F1, D1, 2), stack(downType, D1, F1, 3)];
      const experts = nativeExpertsInPlace(addon, gate!, up!, down!, false)!;
      expect(experts).not.toBeNull();
      const bytes = (t: HostTensor[]): number => t.reduce((a, v) => a + v.data.byteLength, 0);
      expect(experts.bytes).toBe(bytes(gate!) + bytes(up!) + bytes(down!));
      const T = 7;
      const x = random(T * D1, 4);
      const { ids, weights } = routing(T, 5);
      const out = new Float32Array(T * D1);
      experts.run(x, T, K, ids, weights, out);
      // The same experts as matrices: gate, up, silu·mul, down per (token, choice).
      const dense = new NativeDense({ threads: 1 });
      const prep = async (t: HostTensor[]) => Promise.all(t.map((w) => dense.prepare(w)));
      const [g, u, dn] = [await prep(gate!), await prep(up!), await prep(down!)];
      let worst = 0;
      for (let t = 0; t < T; t++) {
        const want = new Float32Array(D1);
        for (let j = 0; j < K; j++) {
          const e = ids[t * K + j]!;
          const xt = x.subarray(t * D1, (t + 1) * D1);
          const a = await dense.matmul(g[e]!, xt, 1);
          const b = await dense.matmul(u[e]!, xt, 1);
          const h = a.map((v, i) => (v / (1 + Math.exp(-v))) * b[i]!);
          const y = await dense.matmul(dn[e]!, h, 1);
          for (let c = 0; c < D1; c++) want[c] += weights[t * K + j]! * y[c]!;
        }
        for (let c = 0; c < D1; c++) worst = Math.max(worst, Math.abs(out[t * D1 + c]! - want[c]!));
      }
      const scale = Math.max(...out.map(Math.abs));
      expect(scale).toBeGreaterThan(0.01);
      expect(worst / scale).toBeLessThan(1e-4);
    });
  }

  // More tokens than experts: groups of several tokens, tiles of 1..4 and more than one tile a row.
  for (const [dtype, downType, F1, D1] of [
    ['q4_0', 'q4_0', F, D],
    ['q4_k', 'q6_k', 256, 256],
  ] as [WeightDType, WeightDType, number, number][]) {
    it(`${dtype} / ${downType}: a token's bits are the same alone, among others, and with the helper threads`, () => {
      const [gate, up, down] = [stack(dtype, F1, D1, 6), stack(dtype, F1, D1, 7), stack(downType, D1, F1, 8)];
      const alone = nativeExpertsInPlace(addon, gate!, up!, down!, false)!;
      new NativeDense({ threads: 2 }); // starts the helper threads
      const shared = nativeExpertsInPlace(addon, gate!, up!, down!, true)!;
      const T = 17;
      const x = random(T * D1, 9);
      const { ids, weights } = routing(T, 10);
      const together = new Float32Array(T * D1);
      shared.run(x, T, K, ids, weights, together);
      for (let t = 0; t < T; t++) {
        const one = new Float32Array(D1);
        const sl = (a: Float32Array | Int32Array) => a.slice(t * K, (t + 1) * K);
        alone.run(x.slice(t * D1, (t + 1) * D1), 1, K, sl(ids) as Int32Array, sl(weights) as Float32Array, one);
        expect(Buffer.from(one.buffer).equals(Buffer.from(together.slice(t * D1, (t + 1) * D1).buffer))).toBe(true);
      }
    });
  }

  it('refuses a bad expert id or a short array, writing nothing', () => {
    const [gate, up, down] = [stack('q8_0', F, D, 11), stack('q8_0', F, D, 12), stack('q8_0', D, F, 13)];
    const experts = nativeExpertsInPlace(addon, gate!, up!, down!, false)!;
    const out = new Float32Array(D).fill(7);
    const ids = Int32Array.of(0, 1, E);
    expect(() => experts.run(random(D, 1), 1, K, ids, new Float32Array(K), out)).toThrow(RangeError);
    expect(() => experts.run(random(D, 1), 2, K, Int32Array.of(0, 1, 2), new Float32Array(K), out)).toThrow(RangeError);
    expect(out.every((v) => v === 7)).toBe(true);
  });

  it('takes only whole stacks of kinds it reads: views apart, f16, q5_K or short K-quant rows are left to the caller', () => {
    const [gate, up, down] = [stack('q4_0', F, D, 14), stack('q4_0', F, D, 15), stack('q4_0', D, F, 16)];
    expect(expertStacks(gate!, up!, down!)).not.toBeNull();
    const apart = gate!.map((t) => ({ ...t, data: t.data.slice() }));
    expect(expertStacks(apart, up!, down!)).toBeNull();
    const f16 = stack('f16', F, D, 17);
    expect(expertStacks(f16, stack('f16', F, D, 18), stack('f16', D, F, 19))).toBeNull();
    const q5 = (rows: number, cols: number, seed: number) => stack('q5_k', rows, cols, seed);
    expect(expertStacks(q5(256, 256, 20), q5(256, 256, 21), q5(256, 256, 22))).toBeNull();
    // gate | up of two kinds, or a K-quant row of 128 (not a whole super-block): refused.
    const k4 = stack('q4_k', 256, 256, 23);
    expect(expertStacks(k4, stack('q6_k', 256, 256, 24), stack('q4_k', 256, 256, 25))).toBeNull();
    expect(expertStacks(k4, stack('q4_k', 256, 256, 26), stack('q4_k', 256, 256, 27))).not.toBeNull();
  });
});
