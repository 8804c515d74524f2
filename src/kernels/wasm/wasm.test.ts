import { beforeAll, describe, expect, it } from 'vitest';
import { Rng, isConfigError } from '../../core/index.js';
import { batchInvarianceCases, denseCases } from '../cases/dense-cases.js';
import { f16PromotionCases } from '../cases/f16-cases.js';
import { opsCases } from '../cases/ops-cases.js';
import { randomF32, randomWeight } from '../cases/support.js';
import { WasmDense, createWasmDense } from './dense.js';
import { WasmOps } from './ops.js';
import { WasmRuntime } from './runtime.js';

// One runtime for the whole file: dense weights, KV pools and views share one memory, as in the engine.
let runtime: WasmRuntime;
beforeAll(async () => {
  runtime = await WasmRuntime.load({ maxMemoryBytes: 512 * 1024 ** 2 });
});

describe('WasmDense runs the dense case suite', () => {
  for (const c of [...denseCases(), ...batchInvarianceCases()]) it(c.name, () => c.run(new WasmDense(runtime)));
});

describe('WasmOps runs the ops case suite', () => {
  for (const c of [...opsCases(), ...f16PromotionCases()]) it(c.name, () => c.run(new WasmOps(runtime)));
});

describe('WasmDense with 2 threads', () => {
  it('splits large matmuls over a worker and gives the same bits as one thread, for every dtype', async () => {
    const threaded = await createWasmDense({ runtime, threads: 2 });
    const single = new WasmDense(await WasmRuntime.load({ maxMemoryBytes: 64 * 1024 ** 2 })); // own memory: no shared scratch
    try {
      for (const dtype of ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as const) {
        const rng = new Rng(11);
        const host = randomWeight(rng, dtype, 301, 1024); // 308k multiply-adds at m = 1: above the split threshold
        const [a, b] = [await threaded.prepare(host), await single.prepare(host)];
        for (const m of [1, 5]) {
          const x = randomF32(rng, m * 1024);
          const [ya, yb] = [await threaded.matmul(a, x, m), await single.matmul(b, x, m)];
          expect(new Uint32Array(ya.buffer)).toEqual(new Uint32Array(yb.buffer));
        }
      }
    } finally {
      await threaded.dispose();
    }
  });
});

describe('WasmRuntime', () => {
  it('keeps earlier views valid when the memory grows', async () => {
    const small = await WasmRuntime.load({ maxMemoryBytes: 16 * 1024 ** 2 });
    const first = new WasmOps(small).allocF32(1000).fill(3);
    const big = new WasmOps(small).allocF32(2 * 1024 ** 2); // 8 MiB: grows the memory
    big[big.length - 1] = 5;
    expect(first.length).toBe(1000);
    expect(first[999]).toBe(3);
    expect(small.owns(first) && small.owns(big)).toBe(true);
  });

  it('reads a view from allocF32 in place: the kernel sees writes made through it', () => {
    const ops = new WasmOps(runtime);
    const x = ops.allocF32(8).fill(1);
    const y = ops.allocF32(8).fill(2);
    ops.addInPlace(x, y, 8);
    expect([...x]).toEqual(Array(8).fill(3));
    expect(runtime.owns(new Float32Array(8))).toBe(false);
  });

  it('refuses an allocation past its maximum with a ConfigError that names the sizes', async () => {
    const small = await WasmRuntime.load({ maxMemoryBytes: 4 * 1024 ** 2 });
    let error: unknown;
    try {
      new WasmOps(small).allocF32(2 * 1024 ** 2);
    } catch (e) {
      error = e;
    }
    expect(isConfigError(error)).toBe(true);
    expect(String((error as Error).message)).toMatch(/8\.0 MiB requested.*4\.0 MiB maximum/);
  });

  it('matmul reads x from and writes y into runtime views directly, with the same bits as plain arrays', async () => {
    const dense = new WasmDense(runtime);
    const ops = new WasmOps(runtime);
    const weight = await dense.prepare(randomWeight(new Rng(9), 'q4_0', 12, 64));
    const plainX = randomF32(new Rng(10), 3 * 64);
    const x = ops.allocF32(3 * 64);
    x.set(plainX);
    const out = ops.allocF32(3 * 12);
    expect(await dense.matmul(weight, x, 3, out)).toBe(out);
    expect([...out]).toEqual([...(await dense.matmul(weight, plainX, 3))]);
  });

  it('refuses attention over a pool that is not in its memory', () => {
    const ops = new WasmOps(runtime);
    const kv = {
      dtype: 'f32' as const,
      data: new Float32Array(64),
      numPages: 2,
      pageSize: 2,
      numLayers: 1,
      numKvHeads: 1,
      headDim: 8,
    };
    const args = {
      layer: 0,
      shape: { numHeads: 1, numKvHeads: 1, headDim: 8, scale: 1 },
      q: new Float32Array(8),
      out: new Float32Array(8),
      numTokens: 1,
      startPos: 0,
      pageTable: Int32Array.from([0]),
    };
    expect(() => ops.attention(kv, args)).toThrow(/KV pool must be allocated/);
  });
});
