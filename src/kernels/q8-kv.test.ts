// q8_0 KV (q8-kv.ts and the attention over it in every backend): the row is llama.cpp's q8_0
// (the GGUF weight decoder reads it), the round trip is within half a step of each block's scale,
// non-finite values poison only their block, and attention over a q8_0 pool stays within a stated
// tolerance of attention over the f32 values it quantized (ref, wasm and native where present).
import { beforeAll, describe, expect, it } from 'vitest';
import { kvHeadBytes, kvRowUnits, Rng, type KvDtype } from '../core/index.js';
import { poisonedPool } from './cases/ops-cases.js';
import { randomF32 } from './cases/support.js';
import { dequantize, quantize } from './formats.js';
import { f16ToF32, Float32Bits } from './half.js';
import { nativeVariantsHere, selectNativeVariant } from './native/native.js';
import { NativeAttentionOps } from './native/native-ops.js';
import { dequantizeKvRow, quantizeKvRow } from './q8-kv.js';
import { RefOps } from './ref/ops.js';
import type { OpKernels } from './types.js';
import { WasmOps } from './wasm/ops.js';
import { WasmRuntime } from './wasm/runtime.js';

const bits = new Float32Bits();

function roundTrip(x: Float32Array, numKvHeads: number, headDim: number): { bytes: Uint8Array; back: Float32Array } {
  const bytes = new Uint8Array(numKvHeads * kvHeadBytes('q8_0', headDim));
  quantizeKvRow(x, 0, numKvHeads, headDim, bytes, 0, bits);
  const back = new Float32Array(x.length);
  dequantizeKvRow(bytes, 0, numKvHeads, headDim, back, 0);
  return { bytes, back };
}

describe('quantizeKvRow / dequantizeKvRow', () => {
  it("writes llama.cpp's q8_0 blocks: the GGUF q8_0 decoder reads the row, and the weight quantizer writes the same bytes", () => {
    const x = randomF32(new Rng(1), 4 * 64, 3);
    const { bytes, back } = roundTrip(x, 4, 64);
    expect(bytes.length).toBe((4 * 64 * 34) / 32); // 1.0625 bytes a value
    const decoded = new Float32Array(x.length);
    dequantize('q8_0', bytes, 0, x.length, decoded);
    expect(decoded).toEqual(back);
    expect(bytes).toEqual(quantize('q8_0', x));
  });

  it.each([1, 3, 6, 8, 31, 32, 33, 40, 48, 64, 100, 256])(
    'headDim %i: each value within half a step of its block scale, the largest magnitude kept to f16 precision',
    (headDim) => {
      const numKvHeads = 3;
      const x = randomF32(new Rng(headDim), numKvHeads * headDim, 10);
      const { bytes, back } = roundTrip(x, numKvHeads, headDim);
      expect(bytes.length).toBe(numKvHeads * kvRowUnits({ numKvHeads: 1, headDim, dtype: 'q8_0' }));
      for (let h = 0; h < numKvHeads; h++) {
        for (let b = 0; b * 32 < headDim; b++) {
          const d = f16ToF32(
            bytes[h * kvHeadBytes('q8_0', headDim) + 34 * b]! |
              (bytes[h * kvHeadBytes('q8_0', headDim) + 34 * b + 1]! << 8),
          );
          const n = Math.min(32, headDim - 32 * b);
          let amax = 0;
          for (let i = 0; i < n; i++) {
            const at = h * headDim + 32 * b + i;
            amax = Math.max(amax, Math.abs(x[at]!));
            // Half a step of the exact scale, plus what rounding the scale to f16 moves 127 steps.
            expect(Math.abs(back[at]! - x[at]!)).toBeLessThanOrEqual(d / 2 + 127 * d * 2 ** -11 + 1e-6);
          }
          expect(Math.abs(d * 127 - amax)).toBeLessThanOrEqual(amax * 2 ** -11);
        }
      }
    },
  );

  it('a block holding a nan or an infinity reads back nan, whole; the other blocks and a zero block are exact', () => {
    const x = randomF32(new Rng(7), 96);
    x[40] = Infinity; // block 1 of 3
    x.fill(0, 64, 96); // block 2: zeros
    const { back } = roundTrip(x, 1, 96);
    expect(back.subarray(32, 64).every(Number.isNaN)).toBe(true);
    expect(back.subarray(64, 96).every((v) => v === 0)).toBe(true);
    expect(back.subarray(0, 32).every(Number.isFinite)).toBe(true);
    x[40] = NaN;
    expect(roundTrip(x, 1, 96).back.subarray(32, 64).every(Number.isNaN)).toBe(true);
  });
});

describe('the wasm quantizer (kv-q8.ts) against q8-kv.ts', () => {
  it.each([64, 40, 3])(
    'headDim %i: writeKv leaves the same bytes, ties, tiny, huge, zero, inf and nan blocks included',
    async (headDim) => {
      const runtime = await WasmRuntime.load({ maxMemoryBytes: 64 * 1024 ** 2 });
      const rng = new Rng(900 + headDim);
      const numKvHeads = 2;
      const positions = 40;
      const x = randomF32(rng, positions * numKvHeads * headDim, 4);
      // Per position, scale one head's values: exact ties (amax 127 -> d 1: x.5 values), tiny
      // (1 / d overflows), subnormal, huge; zeros; a nan; an infinity.
      const perPos = numKvHeads * headDim;
      const scales = [1, 1e-38, 1e-44, 1e30, 0];
      for (let p = 0; p < positions; p++) {
        const row = x.subarray(p * perPos, p * perPos + headDim);
        if (p % 7 === 0) row.forEach((_, i) => (row[i] = i === 0 ? 127 : Math.round(rng.nextU32() % 200) / 2 - 50));
        else if (p % 7 < 6) row.forEach((v, i) => (row[i] = v * scales[(p % 7) - 1]!));
        if (p === 13) x[p * perPos + headDim + 1] = NaN;
        if (p === 20) x[p * perPos + headDim + 2] = -Infinity;
      }
      const geometry = { numLayers: 1, pageSize: 8, numKvHeads, headDim };
      const pageTable = Int32Array.from([4, 0, 2, 1, 3]);
      const write = (ops: OpKernels): Uint8Array => {
        const kv = poisonedPool(ops, 'q8_0', geometry, 6);
        ops.writeKv(kv, 0, pageTable, 0, positions, x, x);
        return (kv.data as Uint8Array).slice();
      };
      const expected = write(new RefOps());
      const actual = write(new WasmOps(runtime));
      const first = actual.findIndex((byte, i) => byte !== expected[i]);
      expect(first, `first differing byte ${first}`).toBe(-1);
    },
  );
});

/**
 * Attention over q8_0 against attention over f32 (the values before quantization), per backend:
 * |out - out_f32| <= Q8_ATTENTION_TOLERANCE * (|out_f32| + 1). Measured: 2.7e-3 to 5.3e-3 (the same in every backend) for
 * N(0, 1) K and V over the four shapes below; the bound leaves ~4x.
 */
const Q8_ATTENTION_TOLERANCE = 2e-2;

describe('attention over a q8_0 pool against the f32 values it quantized', () => {
  let runtime: WasmRuntime;
  beforeAll(async () => {
    runtime = await WasmRuntime.load({ maxMemoryBytes: 256 * 1024 ** 2 });
  });
  // Each native variant this CPU runs; selected (process-wide) just before its run.
  const backends = (): [string, OpKernels, () => void][] => [
    ['ref', new RefOps(), () => {}],
    ['wasm', new WasmOps(runtime), () => {}],
    ...nativeVariantsHere().map(
      (variant) =>
        [
          `native ${variant}`,
          new NativeAttentionOps(new WasmOps(runtime)),
          () => void selectNativeVariant(variant),
        ] as [string, OpKernels, () => void],
    ),
  ];

  it.each([
    [8, 2, 64, 300],
    [4, 4, 128, 150],
    [6, 3, 48, 70],
    [2, 1, 40, 33],
  ])(
    '%i heads / %i KV heads x %i, %i positions: within the stated tolerance in every backend',
    (numHeads, numKvHeads, headDim, positions) => {
      const pageSize = 16;
      const numPages = Math.ceil(positions / pageSize) + 2;
      const pageTable = Int32Array.from({ length: numPages - 2 }, (_, i) => (i * 5 + 1) % numPages);
      const rng = new Rng(headDim + positions);
      const kvDim = numKvHeads * headDim;
      const k = randomF32(rng, positions * kvDim);
      const v = randomF32(rng, positions * kvDim);
      const q = randomF32(rng, 2 * numHeads * headDim);
      const shape = { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
      const geometry = { numLayers: 2, pageSize, numKvHeads, headDim };
      const run = (ops: OpKernels, dtype: KvDtype): Float32Array => {
        const kv = poisonedPool(ops, dtype, geometry, numPages);
        ops.writeKv(kv, 1, pageTable, 0, positions, k, v);
        const out = new Float32Array(2 * numHeads * headDim);
        ops.attention(kv, { layer: 1, shape, q, out, numTokens: 2, startPos: positions - 2, pageTable });
        return out;
      };
      const exact = run(new RefOps(), 'f32');
      for (const [name, ops, select] of backends()) {
        select();
        const got = run(ops, 'q8_0');
        let worst = 0;
        for (let i = 0; i < exact.length; i++)
          worst = Math.max(worst, Math.abs(got[i]! - exact[i]!) / (Math.abs(exact[i]!) + 1));
        expect(worst, name).toBeLessThan(Q8_ATTENTION_TOLERANCE);
        expect(worst, `${name}: q8_0 must differ from f32 somewhere`).toBeGreaterThan(0);
      }
      if (nativeVariantsHere().length > 0) selectNativeVariant('auto');
    },
  );
});
