// Kernel micro-benchmark (`npm run bench:kernels`): memory bandwidth, dense matmul GFLOP/s and
// GB/s of weights per backend (wasm, native) at m = 1, 4, 16 on m100-sized matrices (f32 and
// q4_0; --dtypes for more), each backend's batch variance (none expected), a chain of matmuls
// like one decode step's, and paged attention µs per token at a 512-token context. Prints numbers side by side from one run; asserts nothing about speed.
import { Rng, type KvDtype } from '../src/core/index.js';
import {
  type DenseKernels,
  type DenseWeight,
  type OpKernels,
  type PagedKvView,
  type WeightDType,
  byteSize,
  createRefOps,
  createWasmDense,
  createWasmOps,
  loadWasmRuntime,
  NativeDense,
  nativeAvailability,
  pageElements,
  quantize,
} from '../src/kernels/index.js';
import { measureReadBandwidth } from './lib/bandwidth.js';

const SHAPES: readonly (readonly [number, number])[] = [
  [768, 768],
  [768, 2048],
  [2048, 768],
  [32000, 768],
]; // [rows = out, cols = in]
/** --dtypes f32,q4_0,q4_k,q5_k,q6_k (default f32,q4_0). */
const dtypesAt = process.argv.indexOf('--dtypes');
const DTYPES = (dtypesAt >= 0 ? process.argv[dtypesAt + 1]! : 'f32,q4_0').split(',') as WeightDType[];
const BATCH = [1, 4, 16];
const quick = process.argv.includes('--quick');
const nativeFound = nativeAvailability();
const native = 'addon' in nativeFound;
const nativeWhy = 'why' in nativeFound ? nativeFound.why : '';

/** Best time per call in ms over a few batches of calls lasting ~targetMs each. */
async function time(fn: () => Promise<unknown> | unknown, targetMs = quick ? 40 : 150): Promise<number> {
  await fn();
  const t0 = performance.now();
  await fn();
  const once = Math.max(performance.now() - t0, 0.001);
  const n = Math.max(1, Math.round(targetMs / 3 / once));
  let best = Infinity;
  for (let batch = 0; batch < 3; batch++) {
    const start = performance.now();
    for (let i = 0; i < n; i++) await fn();
    best = Math.min(best, (performance.now() - start) / n);
  }
  return best;
}

function weightBytes(dtype: WeightDType, rows: number, cols: number): number {
  return byteSize(dtype, rows * cols);
}

const pad = (s: string | number, n: number) => String(s).padStart(n);

/** The native kernels on one thread and with a helper at every m, or none (and why) when the addon is missing. */
function nativeBackends(): [string, DenseKernels][] {
  if (!native) {
    console.log(`(native kernels unavailable: ${nativeWhy})`);
    return [];
  }
  return [
    ['native t1', new NativeDense({ threads: 1 })],
    ['native t2', new NativeDense({ threads: 2, helperMinM: 1 })],
  ];
}

async function denseSection(bandwidth: number): Promise<void> {
  const runtime = await loadWasmRuntime();
  const backends: [string, DenseKernels][] = [
    ['wasm t1', await createWasmDense({ runtime })],
    ['wasm t2', await createWasmDense({ runtime, threads: 2 })],
    ...nativeBackends(),
  ];
  console.log('\n## Dense y = x·Wᵀ: µs per call | GFLOP/s | GB/s of weights (bound: %s GB/s)', bandwidth.toFixed(1));
  console.log(
    `${'dtype'.padEnd(6)}${'rows x cols'.padStart(12)}${pad('m', 4)}  ${backends.map(([n]) => n.padStart(26)).join('')}`,
  );
  const rng = new Rng(1);
  for (const dtype of DTYPES) {
    for (const [rows, cols] of SHAPES) {
      const data = quantize(
        dtype,
        Float32Array.from({ length: rows * cols }, () => rng.normal() * 0.05),
      );
      const prepared: DenseWeight[] = [];
      for (const [, b] of backends) prepared.push(await b.prepare({ name: 'w', dtype, shape: [rows, cols], data }));
      for (const m of BATCH) {
        const x = Float32Array.from({ length: m * cols }, () => rng.normal());
        const cells: string[] = [];
        for (const [i, [, b]] of backends.entries()) {
          const out = new Float32Array(m * rows);
          const ms = await time(() => b.matmul(prepared[i]!, x, m, out));
          const gflops = (2 * m * rows * cols) / ms / 1e6;
          const gbs = weightBytes(dtype, rows, cols) / ms / 1e6;
          cells.push(`${pad((ms * 1000).toFixed(0), 8)} ${pad(gflops.toFixed(1), 7)} ${pad(gbs.toFixed(1), 7)}  `);
        }
        console.log(`${dtype.padEnd(6)}${pad(`${rows}x${cols}`, 12)}${pad(m, 4)}  ${cells.join('')}`);
      }
    }
  }
  for (const [, b] of backends) await b.dispose();
}

/** Do a backend's rows change bits between m = 1 and a batch of m = 3, 16, 64? */
async function batchVarianceSection(): Promise<void> {
  console.log('\n## Batch variance: each row computed alone (m = 1) vs inside a batch of m, bitwise');
  const rng = new Rng(2);
  const runtime = await loadWasmRuntime({ maxMemoryBytes: 256 * 1024 ** 2 });
  const backends: [string, DenseKernels][] = [
    ['wasm t2', await createWasmDense({ runtime, threads: 2 })],
    ...nativeBackends(),
  ];
  for (const dtype of DTYPES) {
    for (const [rows, cols] of [
      [768, 768],
      [2048, 768],
    ] as const) {
      const data = quantize(
        dtype,
        Float32Array.from({ length: rows * cols }, () => rng.normal() * 0.05),
      );
      const x = Float32Array.from({ length: 64 * cols }, () => rng.normal());
      for (const [name, b] of backends) {
        const w = await b.prepare({ name: 'w', dtype, shape: [rows, cols], data });
        const alone: Float32Array[] = [];
        for (let i = 0; i < 64; i++) alone.push(await b.matmul(w, x.subarray(i * cols, (i + 1) * cols), 1));
        const cells: string[] = [];
        for (const m of [3, 16, 64]) {
          const batch = await b.matmul(w, x, m);
          let differing = 0;
          let maxDiff = 0;
          let maxAbs = 0;
          for (let i = 0; i < m; i++) {
            for (let r = 0; r < rows; r++) {
              const [a, c] = [alone[i]![r]!, batch[i * rows + r]!];
              if (!Object.is(a, c)) differing++;
              maxDiff = Math.max(maxDiff, Math.abs(a - c));
              maxAbs = Math.max(maxAbs, Math.abs(c));
            }
          }
          cells.push(
            `m=${m}: ${pad(((100 * differing) / (m * rows)).toFixed(1), 5)}% differ (max ${(maxDiff / maxAbs).toExponential(1)} of max|y|)`,
          );
        }
        console.log(`${name.padEnd(14)} ${dtype.padEnd(5)} ${`${rows}x${cols}`.padStart(9)}  ${cells.join('  ')}`);
      }
    }
  }
  for (const [, b] of backends) await b.dispose();
}

/** 48 [768x768] f32 matmuls in sequence at m = 1, one session each, like one decode step. */
async function chainSection(): Promise<void> {
  console.log('\n## A chain of 48 [768x768] f32 matmuls at m = 1, like one decode step: GB/s of weights');
  const rng = new Rng(3);
  const data = quantize(
    'f32',
    Float32Array.from({ length: 768 * 768 }, () => rng.normal() * 0.05),
  );
  const configs: [string, () => Promise<DenseKernels>][] = [
    ['wasm t1', () => createWasmDense()],
    ['wasm t2', () => createWasmDense({ threads: 2 })],
    ...(native
      ? ([
          ['native t1', async () => new NativeDense({ threads: 1 })],
          ['native t2', async () => new NativeDense({ threads: 2 })],
        ] as [string, () => Promise<DenseKernels>][])
      : []),
  ];
  for (const [name, make] of configs) {
    const b = await make();
    const weights: DenseWeight[] = [];
    for (let i = 0; i < 48; i++)
      weights.push(await b.prepare({ name: `w${i}`, dtype: 'f32', shape: [768, 768], data }));
    let x: Float32Array = Float32Array.from({ length: 768 }, () => rng.normal());
    const ms = await time(async () => {
      for (const w of weights) x = await b.matmul(w, x, 1);
    });
    console.log(
      `${name.padEnd(16)} ${(ms * 1000).toFixed(0).padStart(7)} µs per chain  ${((48 * 768 * 768 * 4) / ms / 1e6).toFixed(1).padStart(6)} GB/s  ${((ms * 1000) / 48).toFixed(1).padStart(6)} µs per matmul`,
    );
    await b.dispose();
  }
}

async function attentionSection(): Promise<void> {
  console.log('\n## Paged attention over a 512-token context, pageSize 16, scattered pages: µs per token per layer');
  console.log('   decode: one token at position 511; prefill: 512 tokens from position 0 (per token)');
  const runtime = await loadWasmRuntime({ maxMemoryBytes: 256 * 1024 ** 2 });
  const wasm = await createWasmOps({ runtime });
  const backends: [string, OpKernels, KvDtype][] = [
    ['wasm', wasm, 'f32'],
    ['wasm f16 KV', wasm, 'f16'],
    ['wasm q8_0 KV', wasm, 'q8_0'],
    ['ref', createRefOps(), 'f32'],
  ];
  const rng = new Rng(4);
  for (const [numHeads, numKvHeads, headDim] of [
    [12, 12, 64],
    [12, 4, 64],
    [32, 8, 64],
  ] as const) {
    const geometry = { numLayers: 1, pageSize: 16, numKvHeads, headDim };
    const numPages = 40;
    const pageTable = Int32Array.from({ length: 32 }, (_, i) => (i * 7) % numPages); // scattered pages
    const kvDim = numKvHeads * headDim;
    const k = Float32Array.from({ length: 512 * kvDim }, () => rng.normal());
    const v = Float32Array.from({ length: 512 * kvDim }, () => rng.normal());
    const q = Float32Array.from({ length: 512 * numHeads * headDim }, () => rng.normal());
    const cells: string[] = [];
    for (const [name, ops, dtype] of backends) {
      const length = numPages * pageElements({ ...geometry, dtype });
      const kv: PagedKvView =
        dtype === 'f16'
          ? { ...geometry, numPages, dtype, data: ops.allocU16(length) }
          : dtype === 'q8_0'
            ? { ...geometry, numPages, dtype, data: ops.allocU8(length) }
            : { ...geometry, numPages, dtype, data: ops.allocF32(length) };
      ops.writeKv(kv, 0, pageTable, 0, 512, k, v);
      const out = ops.allocF32(512 * numHeads * headDim);
      const shape = { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
      const decodeMs = await time(() =>
        ops.attention(kv, {
          layer: 0,
          shape,
          q: q.subarray(0, numHeads * headDim),
          out,
          numTokens: 1,
          startPos: 511,
          pageTable,
        }),
      );
      const prefill =
        name === 'ref'
          ? '(skipped: too slow)'
          : `${(((await time(() => ops.attention(kv, { layer: 0, shape, q, out, numTokens: 512, startPos: 0, pageTable }))) * 1000) / 512).toFixed(1).padStart(6)} µs`;
      cells.push(`${name}: decode ${(decodeMs * 1000).toFixed(1).padStart(7)} µs, prefill ${prefill}`);
    }
    console.log(`heads ${numHeads}/${numKvHeads} x ${headDim}:  ${cells.join('  |  ')}`);
  }
}

const bandwidth = await measureReadBandwidth();
console.log(
  `# Kernel benchmark\nmemory read bandwidth: ${bandwidth.gbPerSecond.toFixed(1)} GB/s (${bandwidth.threads} threads, ${(bandwidth.bytes / 1024 ** 2).toFixed(0)} MiB)`,
);
const single = await measureReadBandwidth({ threads: 1 });
console.log(`memory read bandwidth, one thread: ${single.gbPerSecond.toFixed(1)} GB/s`);
await denseSection(bandwidth.gbPerSecond);
await batchVarianceSection();
await chainSection();
await attentionSection();
