// One-off measurement (issue 31, "one seam for kernels"): what onnxruntime still earns beside the
// native kernels. Today (engine.ts createKernels) ort runs only f16/bf16 matmuls over 64 rows
// (prefill chunks); this times prefill (one 256-token chunk) and batch-1 decode with the default
// split (native + ort), native alone, ort alone (TESSERA_DENSE=ort) and wasm (--deterministic),
// interleaved round by round in one run, and prints medians. Kept in the commit history only.
//   node --import ./bench/lib/register-ts.mjs bench/ort-share.ts [--models m100:f16,llama-1b:f16] [--rounds 3]
import { samplingParams } from '../src/core/index.js';
import {
  createWasmDense,
  createWasmOps,
  loadWasmRuntime,
  NativeAttentionOps,
  NativeDense,
  type DenseKernels,
  type OpKernels,
} from '../src/kernels/index.js';
import { generate, loadModel, ModelRunner, prepareWeights } from '../src/model/index.js';
import { allocKvView } from '../src/model/engine.js';
import { OrtDense } from '../src/kernels/ort/dense.js';
import { BatchSplitDense } from '../src/model/dense-split.js';
import { PagePool } from '../src/pages/index.js';
import { benchModel, median, parseModels, specLabel } from './lib/yardstick.js';

const args = process.argv.slice(2);
const flag = (n: string) => (args.indexOf(n) >= 0 ? args[args.indexOf(n) + 1] : undefined);
const SPECS = parseModels(flag('--models') ?? 'm100:f16,m100:q4_0,llama-1b:q4_k_m,llama-1b:f16');
const ROUNDS = Number(flag('--rounds') ?? 3);
const PROMPT = Number(flag('--tokens') ?? 256);
const DECODE = Number(flag('--decode') ?? 24);
const THREADS = 2;
type Path = 'split' | 'native' | 'ort' | 'wasm';
const PATHS: Path[] = (flag('--paths')?.split(',') as Path[]) ?? ['split', 'native', 'ort', 'wasm'];

async function kernels(path: Path): Promise<{ dense: DenseKernels; ops: OpKernels }> {
  const runtime = await loadWasmRuntime();
  const wasm = await createWasmOps({ runtime });
  const native = new NativeAttentionOps(wasm);
  const ort = async () => new OrtDense({ threads: THREADS });
  const half = (d: string) => (d === 'f16' || d === 'bf16' ? 64 : Infinity);
  switch (path) {
    case 'split':
      return { dense: new BatchSplitDense(new NativeDense({ threads: THREADS }), await ort(), half), ops: native };
    case 'native':
      return { dense: new NativeDense({ threads: THREADS }), ops: native };
    case 'ort':
      return { dense: await ort(), ops: wasm };
    case 'wasm':
      return { dense: await createWasmDense({ runtime, threads: THREADS }), ops: wasm };
  }
}

for (const spec of SPECS) {
  const model = await loadModel(await benchModel(spec));
  const prompt = Array.from({ length: PROMPT }, (_, i) => 1 + ((i * 7919) % (model.config.vocabSize - 1)));
  const runs = new Map<Path, { prefill: number[]; decode: number[]; rss: number }>();
  for (let round = 0; round < ROUNDS; round++)
    for (const path of PATHS) {
      const { dense, ops } = await kernels(path);
      const weights = await prepareWeights(model.config, model.tensors, dense, ops);
      const rss = process.memoryUsage().rss;
      const pool = new PagePool({
        kv: allocKvView(ops, {
          numPages: 32,
          pageSize: 16,
          numLayers: model.config.numLayers,
          numKvHeads: model.config.numKvHeads,
          headDim: model.config.headDim,
          dtype: 'f32',
        }),
      });
      const runner = new ModelRunner({
        config: model.config,
        weights,
        dense,
        ops,
        pool,
        maxStepTokens: 256,
        maxStepLogits: 8,
      });
      const { timing } = await generate(runner, [
        { promptIds: prompt, sampling: samplingParams({ maxTokens: DECODE, ignoreEos: true }) },
      ]);
      const r = runs.get(path) ?? { prefill: [], decode: [], rss: 0 };
      r.prefill.push((PROMPT / timing.prefillMs) * 1000);
      r.decode.push((timing.numDecodeTokens / timing.decodeMs) * 1000);
      r.rss = Math.max(r.rss, rss);
      runs.set(path, r);
      await dense.dispose();
    }
  const base = runs.get(PATHS[0]!)!;
  for (const [path, r] of runs)
    console.log(
      `${specLabel(spec)} ${path.padEnd(6)} prefill ${median(r.prefill).toFixed(1)} tok/s (${(median(r.prefill) / median(base.prefill)).toFixed(2)}x) [${r.prefill.map((v) => v.toFixed(0)).join(' ')}]` +
        `  decode ${median(r.decode).toFixed(1)} tok/s (${(median(r.decode) / median(base.decode)).toFixed(2)}x) [${r.decode.map((v) => v.toFixed(1)).join(' ')}]  rss<=${(r.rss / 2 ** 30).toFixed(2)} GiB`,
    );
}
