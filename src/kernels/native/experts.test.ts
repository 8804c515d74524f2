// experts.c (a layer's routed experts over GGML q4_0 / q8_0 stacks in place) against the same
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
  const bytes = quantize(dtype, random(E * rows * cols, seed));
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

  for (const dtype of ['q4_0', 'q8_0'] as const) {
    it(`${dtype}: the mixture equals the experts repacked on NativeDense, to float rounding`, async () => {
      const [gate, up, down] = [stack(dtype, F, D, 1), stack(dtype, F, D, 2), stack(dtype, D, F, 3)];
      const experts = nativeExpertsInPlace(addon, gate!, up!, down!, false)!;
      expect(experts).not.toBeNull();
      expect(experts.bytes).toBe(3 * E * F * (D / 32) * (dtype === 'q4_0' ? 18 : 34));
      const T = 5;
      const x = random(T * D, 4);
      const { ids, weights } = routing(T, 5);
      const out = new Float32Array(T * D);
      experts.run(x, T, K, ids, weights, out);
      // The same experts as matrices: gate, up, silu·mul, down per (token, choice).
      const dense = new NativeDense({ threads: 1 });
      const prep = async (t: HostTensor[]) => Promise.all(t.map((w) => dense.prepare(w)));
      const [g, u, dn] = [await prep(gate!), await prep(up!), await prep(down!)];
      let worst = 0;
      for (let t = 0; t < T; t++) {
        const want = new Float32Array(D);
        for (let j = 0; j < K; j++) {
          const e = ids[t * K + j]!;
          const xt = x.subarray(t * D, (t + 1) * D);
          const a = await dense.matmul(g[e]!, xt, 1);
          const b = await dense.matmul(u[e]!, xt, 1);
          const h = a.map((v, i) => (v / (1 + Math.exp(-v))) * b[i]!);
          const y = await dense.matmul(dn[e]!, h, 1);
          for (let c = 0; c < D; c++) want[c] += weights[t * K + j]! * y[c]!;
        }
        for (let c = 0; c < D; c++) worst = Math.max(worst, Math.abs(out[t * D + c]! - want[c]!));
      }
      const scale = Math.max(...out.map(Math.abs));
      expect(scale).toBeGreaterThan(0.01);
      expect(worst / scale).toBeLessThan(1e-4);
    });
  }

  it("a token's bits are the same alone, among others, and with the helper threads", () => {
    const [gate, up, down] = [stack('q4_0', F, D, 6), stack('q4_0', F, D, 7), stack('q4_0', D, F, 8)];
    const alone = nativeExpertsInPlace(addon, gate!, up!, down!, false)!;
    new NativeDense({ threads: 2 }); // starts the helper threads
    const shared = nativeExpertsInPlace(addon, gate!, up!, down!, true)!;
    const T = 9;
    const x = random(T * D, 9);
    const { ids, weights } = routing(T, 10);
    const together = new Float32Array(T * D);
    shared.run(x, T, K, ids, weights, together);
    for (let t = 0; t < T; t++) {
      const one = new Float32Array(D);
      const sl = (a: Float32Array | Int32Array) => a.slice(t * K, (t + 1) * K);
      alone.run(x.slice(t * D, (t + 1) * D), 1, K, sl(ids) as Int32Array, sl(weights) as Float32Array, one);
      expect(Buffer.from(one.buffer).equals(Buffer.from(together.slice(t * D, (t + 1) * D).buffer))).toBe(true);
    }
  });

  it('refuses a bad expert id or a short array, writing nothing', () => {
    const [gate, up, down] = [stack('q8_0', F, D, 11), stack('q8_0', F, D, 12), stack('q8_0', D, F, 13)];
    const experts = nativeExpertsInPlace(addon, gate!, up!, down!, false)!;
    const out = new Float32Array(D).fill(7);
    const ids = Int32Array.of(0, 1, E);
    expect(() => experts.run(random(D, 1), 1, K, ids, new Float32Array(K), out)).toThrow(RangeError);
    expect(() => experts.run(random(D, 1), 2, K, Int32Array.of(0, 1, 2), new Float32Array(K), out)).toThrow(RangeError);
    expect(out.every((v) => v === 7)).toBe(true);
  });

  it('takes only whole stacks of one kind it reads: views apart, f16 or q4_K experts are left to the caller', () => {
    const [gate, up, down] = [stack('q4_0', F, D, 14), stack('q4_0', F, D, 15), stack('q4_0', D, F, 16)];
    expect(expertStacks(gate!, up!, down!)).not.toBeNull();
    const apart = gate!.map((t) => ({ ...t, data: t.data.slice() }));
    expect(expertStacks(apart, up!, down!)).toBeNull();
    const f16 = stack('f16', F, D, 17);
    expect(expertStacks(f16, stack('f16', F, D, 18), stack('f16', D, F, 19))).toBeNull();
  });
});
