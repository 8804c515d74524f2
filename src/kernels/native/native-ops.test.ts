import { beforeAll, describe, expect, it } from 'vitest';
import { f16PromotionCases } from '../cases/f16-cases.js';
import { opsCases } from '../cases/ops-cases.js';
import { WasmOps } from '../wasm/ops.js';
import { WasmRuntime } from '../wasm/runtime.js';
import { nativeAvailability, nativeVariantsHere, selectNativeVariant } from './native.js';
import { NativeAttentionOps } from './native-ops.js';

let runtime: WasmRuntime;
beforeAll(async () => {
  runtime = await WasmRuntime.load({ maxMemoryBytes: 512 * 1024 ** 2 });
});

// Every variant this CPU runs (one per process: each describe selects its own first).
for (const variant of nativeVariantsHere())
  describe(`NativeAttentionOps ${variant} (attention on the addon, the rest on wasm) runs the ops case suite`, () => {
    beforeAll(() => void selectNativeVariant(variant));
    for (const c of [...opsCases(), ...f16PromotionCases()])
      it(c.name, () => c.run(new NativeAttentionOps(new WasmOps(runtime))));
  });

describe('the addon attention itself', () => {
  beforeAll(() => void selectNativeVariant('auto'));
  // One layer, page size 4, 1 KV head of 16, 2 heads; a pool of 3 pages.
  const geometry = { numLayers: 1, pageSize: 4, numKvHeads: 1, headDim: 16 };
  const pageElements = 2 * 4 * 16;
  const call = (pool: Float32Array | Uint16Array, pageTable: number[], out: Float32Array, startPos = 5) => {
    const found = nativeAvailability();
    if (!('addon' in found)) throw new Error(found.why);
    found.addon.attention(
      pool,
      geometry.numLayers,
      geometry.pageSize,
      geometry.numKvHeads,
      geometry.headDim,
      0,
      Int32Array.from(pageTable),
      new Float32Array(2 * 16).fill(0.25),
      out,
      1,
      startPos,
      2,
      0.25,
      0,
      0,
      null,
    );
  };

  it('refuses, before reading or writing anything, a page number outside the pool (its own check, not only layout.ts)', () => {
    for (const pool of [new Float32Array(3 * pageElements).fill(1), new Uint16Array(3 * pageElements).fill(0x3c00)]) {
      const out = new Float32Array(32).fill(7);
      call(pool, [2, 0], out);
      expect(out.every((v) => Math.abs(v - 1) < 1e-6)).toBe(true); // V all ones: out = 1
      out.fill(7);
      expect(() => call(pool, [2, 3], out)).toThrow(/outside the pool/);
      expect(() => call(pool, [-1, 0], out)).toThrow(/outside the pool/);
      expect(() => call(pool, [2], out)).toThrow(/too short/);
      expect(out.every((v) => v === 7)).toBe(true);
      // A pool cut short by one element has only 2 whole pages.
      expect(() => call(pool.subarray(1), [2, 0], out)).toThrow(/outside the pool/);
    }
  });
});
