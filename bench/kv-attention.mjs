// Attention alone over each KV dtype (issue 32's "decode at a 2k context at least as fast as f32
// KV"): `node bench/kv-attention.mjs [--contexts 512,2048,4096] [--trials 7]` after
// `npx tsc -p tsconfig.build.json` (it runs the built dist/ and build/'s kernels, no TypeScript
// loader, so it runs wherever Node and those two folders are). m100's shape (12 layers, 12 heads,
// 4 KV heads x 64), pageSize 16, pages scattered across a pool larger than the caches; per
// context, one decode token per layer over all 12 layers, for each backend (native where the
// addon loads, wasm) and dtype, the trials interleaved across dtypes so drifting load hits all
// alike. Prints µs per decode token (all layers), the median of the trials, and the ratio to f32
// of the same backend; asserts nothing.
import { cpus, loadavg } from 'node:os';
import { Rng, kvRowUnits } from '../dist/core/index.js';
import { nativeAvailability } from '../dist/kernels/native/native.js';
import { NativeAttentionOps } from '../dist/kernels/native/native-ops.js';
import { WasmOps } from '../dist/kernels/wasm/ops.js';
import { WasmRuntime } from '../dist/kernels/wasm/runtime.js';

const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const CONTEXTS = (flag('--contexts') ?? '512,2048,4096').split(',').map(Number);
const TRIALS = Number(flag('--trials') ?? 7);
const DTYPES = ['f32', 'f16', 'q8_0'];
const [numLayers, numHeads, numKvHeads, headDim, pageSize] = [12, 12, 4, 64, 16];

const runtime = await WasmRuntime.load({ maxMemoryBytes: 3 * 1024 ** 3 });
const wasm = new WasmOps(runtime);
const backends = [['wasm', wasm]];
if ('addon' in nativeAvailability()) backends.unshift(['native', new NativeAttentionOps(wasm)]);

console.log(
  `# attention per decode token (12 layers of m100: 12 heads / 4 KV heads x 64), ${cpus()[0]?.model ?? 'cpu'} x${cpus().length}, load ${loadavg()[0].toFixed(1)}`,
);
const rng = new Rng(5);
const normal = (n) => Float32Array.from({ length: n }, () => rng.normal());
for (const context of CONTEXTS) {
  const pagesPerSeq = Math.ceil((context + 1) / pageSize);
  const numPages = 2 * pagesPerSeq;
  const pageTable = Int32Array.from({ length: pagesPerSeq }, (_, i) => (i * 7 + 3) % numPages);
  const kvDim = numKvHeads * headDim;
  const k = normal(context * kvDim);
  const v = normal(context * kvDim);
  const q = normal(numHeads * headDim);
  const shape = { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
  const pools = new Map();
  for (const [name, ops] of backends) {
    for (const dtype of DTYPES) {
      const geometry = { numPages, pageSize, numLayers, numKvHeads, headDim, dtype };
      const length = numPages * numLayers * 2 * pageSize * kvRowUnits(geometry);
      const data =
        dtype === 'f32' ? ops.allocF32(length) : dtype === 'f16' ? ops.allocU16(length) : ops.allocU8(length);
      const kv = { ...geometry, data };
      for (let layer = 0; layer < numLayers; layer++) ops.writeKv(kv, layer, pageTable, 0, context, k, v);
      pools.set(`${name} ${dtype}`, kv);
    }
  }
  const out = wasm.allocF32(numHeads * headDim);
  const times = new Map([...pools.keys()].map((key) => [key, []]));
  for (let trial = 0; trial < TRIALS; trial++) {
    for (const [name, ops] of backends) {
      for (const dtype of DTYPES) {
        const kv = pools.get(`${name} ${dtype}`);
        const reps = Math.max(1, Math.round(20000 / context));
        const t0 = performance.now();
        for (let r = 0; r < reps; r++)
          for (let layer = 0; layer < numLayers; layer++)
            ops.attention(kv, { layer, shape, q, out, numTokens: 1, startPos: context - 1, pageTable });
        times.get(`${name} ${dtype}`).push(((performance.now() - t0) * 1000) / reps);
      }
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const [name] of backends) {
    const base = median(times.get(`${name} f32`));
    const cells = DTYPES.map((dtype) => {
      const m = median(times.get(`${name} ${dtype}`));
      return `${dtype} ${m.toFixed(0).padStart(6)} µs (${(base / m).toFixed(2)}x f32's speed)`;
    });
    console.log(`context ${String(context).padStart(5)}, ${name.padEnd(6)}: ${cells.join('  ')}`);
  }
}
