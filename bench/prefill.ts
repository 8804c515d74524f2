// Prefill benchmark (`npm run bench:prefill`): prompt tokens/s of one prompt of 512 tokens (the
// first token sampled from its last logits) on gen-model's presets, Tessera beside llama.cpp's
// own llama-bench `-p 512 -n 0` (built natively by scripts/build-llama.mjs) on the same GGUF file
// at the same thread count, in one run: the two take turns, several rounds, medians count.
// Tessera chunks the prompt into steps of --chunk tokens (the engine's default, as `serve` runs
// it); llama-bench evaluates it in its default 512-token micro-batches. Prints the table and
// writes bench/results/prefill-<time>.json. Asserts nothing about speed.
//
//   node --import ./bench/lib/register-ts.mjs bench/prefill.ts [--quick] [--rounds N]
//     [--models m100:q4_0,m100:f16,llama-1b:q4_k_m] [--tokens 512] [--chunk 256] [--threads N] [--cpu auto|avx512|avx2] [--no-llama]
//   BENCH_MODEL_DIR: where generated files are kept (default bench/results/models).
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { samplingParams } from '../src/core/index.js';
import { createEngine, DEFAULT_MAX_STEP_TOKENS, generate, type Engine } from '../src/engine/index.js';
import { loadModel } from '../src/model/index.js';
import { selectNativeVariant, type NativeVariantChoice } from '../src/kernels/index.js';
import { llamaBench, llamaBuildFor, llamaNativeBin } from './lib/llama-native.js';
import {
  benchModel,
  median,
  parseModels,
  printYardstick,
  ratioOf,
  specLabel,
  type YardstickRow,
} from './lib/yardstick.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const THREADS = Number(flag('--threads') ?? process.env['BENCH_THREADS'] ?? availableParallelism());
const ROUNDS = Number(flag('--rounds') ?? (quick ? 1 : 3));
const TOKENS = Number(flag('--tokens') ?? (quick ? 128 : 512));
const CHUNK = Number(flag('--chunk') ?? DEFAULT_MAX_STEP_TOKENS);
const SPECS = parseModels(
  flag('--models') ?? process.env['BENCH_MODELS'] ?? (quick ? 'm100:q4_0' : 'm100:q4_0,m100:f16,m100:q4_k_m'),
);

const prompt = [1, ...Array.from({ length: TOKENS - 1 }, (_, j) => 300 + ((j * 104729) % 31000))];

/** Prompt tokens/s of one prefill of `prompt` (the first token sampled; no decode). */
async function tesseraPrefill(engine: Engine): Promise<number> {
  const sampling = samplingParams({ maxTokens: 1, ignoreEos: true });
  const { timing } = await generate(engine.runner, [{ promptIds: prompt, sampling }]);
  return TOKENS / (timing.prefillMs / 1000);
}

// --cpu avx2: Tessera's AVX2 kernels against llama.cpp's AVX2 build (scripts/build-llama.mjs --variant avx2).
const CPU = (flag('--cpu') ?? 'auto') as NativeVariantChoice;
if (CPU !== 'auto') selectNativeVariant(CPU);
const found = llamaNativeBin(llamaBuildFor(CPU));
if (!('bin' in found)) process.stderr.write(`llama.cpp's tools are unavailable (${found.why}): Tessera alone\n`);
const bin = 'bin' in found ? found.bin : null;
console.log(
  `# Prefill benchmark: ${SPECS.map(specLabel).join(', ')}; one prompt of ${TOKENS} tokens (Tessera in steps of ${CHUNK}); ${ROUNDS} interleaved rounds, medians; ${THREADS} threads each`,
);
console.log(
  `machine: ${cpus()[0]?.model ?? '?'} x ${availableParallelism()} threads, load average ${loadavg()[0]!.toFixed(1)}; llama.cpp: ${bin ?? 'not built'}`,
);
const rows: YardstickRow[] = [];
let kernels = '?';
for (const spec of SPECS) {
  const path = await benchModel(spec);
  const engine = await createEngine(await loadModel(path), {
    kvPages: Math.ceil(TOKENS / 16) + 16,
    threads: THREADS,
    maxStepTokens: CHUNK,
  });
  kernels = `${engine.kernels.dense} dense, ${engine.kernels.ops} ops`;
  try {
    await tesseraPrefill(engine); // warm-up
    const ours: number[] = [];
    const theirs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      ours.push(await tesseraPrefill(engine));
      if (bin !== null)
        theirs.push(
          (await llamaBench(bin, { model: path, threads: THREADS, prompt: TOKENS, gen: 0, depth: 0, reps: 1 }))
            .tokensPerSecond,
        );
    }
    rows.push({
      model: specLabel(spec),
      measure: `prefill of ${TOKENS} tokens, tok/s (pp${TOKENS})`,
      tessera: median(ours),
      llama: median(theirs),
      tesseraRuns: ours,
      llamaRuns: theirs,
      better: 'higher',
    });
    process.stderr.write(
      `${specLabel(spec)}: tessera ${ours.map((v) => v.toFixed(0)).join(' ')} | llama.cpp ${theirs.map((v) => v.toFixed(0)).join(' ')}\n`,
    );
  } finally {
    await engine.dispose();
  }
}
printYardstick(`Prefill, Tessera (${kernels}) vs llama.cpp llama-bench, ${THREADS} threads each`, rows);
const out = join('bench', 'results', `prefill-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(join('bench', 'results'), { recursive: true });
await writeFile(
  out,
  `${JSON.stringify({ threads: THREADS, rounds: ROUNDS, tokens: TOKENS, chunk: CHUNK, llama: bin, cpu: cpus()[0]?.model, rows: rows.map((r) => ({ ...r, ratio: ratioOf(r) })) }, null, 2)}\n`,
);
console.log(`\nwrote ${out}`);
