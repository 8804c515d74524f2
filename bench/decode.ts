// Decode benchmark (`npm run bench:decode`): batch-1 decode tokens/s at context depths 0 and 512
// on gen-model's presets, Tessera beside llama.cpp's own llama-bench (built natively from the
// bundled source by scripts/build-llama.mjs, cached under bench/results/llama-native/) on the same
// GGUF file at the same thread count, in one run: the two take turns, several rounds, and each
// side's median counts (llama-bench `-n 64 -d <depth> -r 1` per round; Tessera: a prompt of
// <depth> tokens, untimed, then 64 greedy tokens). Tessera's batch 4 and 16 are printed too
// (llama.cpp's batched counterpart is llama-server -np N in bench:serve). Also the memory-bandwidth
// bound measured in this run (batch-1 ceiling = bandwidth / weight bytes read per token) and the
// cost of the page checks per decode step. Prints a table and writes bench/results/decode-<time>.json.
// Asserts nothing about speed (a benchmark, not a test).
//
//   node --import ./bench/lib/register-ts.mjs bench/decode.ts [--quick] [--tokens N] [--rounds N]
//     [--models m100:q4_0,m100:f16,llama-1b:q4_k_m] [--depths 0,512] [--threads N] [--cpu auto|avx512|avx2] [--no-llama]
//   --models (or BENCH_MODELS): preset:dtype pairs, default m100:q4_0,m100:f16,m100:q4_k_m.
//     llama-1b is Llama-3.2-1B's shape (~1B parameters; its files take minutes to generate the
//     first time, ~0.7 GB in q4_k_m, 2 GB in f16).
//   --threads (or BENCH_THREADS): both sides' threads (default all cores).
//   BENCH_MODEL_DIR: where generated files are kept (default bench/results/models).
//   --llama-examples DIR (or BENCH_LLAMA_EXAMPLES): DIR/bin/llama-batched-bench (scripts/build-llama.mjs
//     --examples DIR) gives llama.cpp's batch-1 and batch-16 decode (prompts of 16, not shared), each
//     round interleaved with Tessera's batch 1 and 16 on the same prompts' shape: yardstick rows.
//   --experts-ab: for an MoE model, Tessera with its routed experts in place (experts.c, the default
//     where the file's layout allows) against repacked (expertsInPlace false), batch 1 and 16, interleaved.
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { asRequestId, DEFAULT_TENANT, FaultSet, samplingParams, type Tag } from '../src/core/index.js';
import { createEngine, generate, type Engine } from '../src/engine/index.js';
import { loadModel, type LoadedModel } from '../src/model/index.js';
import { measureReadBandwidth } from './lib/bandwidth.js';
import { selectNativeVariant, type NativeVariantChoice } from '../src/kernels/index.js';
import { llamaBatchedBench, llamaBench, llamaBuildFor, llamaNativeBin } from './lib/llama-native.js';
import { existsSync } from 'node:fs';
import { groupedBarsSvg, svgPathFor } from './lib/svg-plot.js';
import {
  benchModel,
  median,
  parseModels,
  printYardstick,
  ratioOf,
  specLabel,
  type BenchModelSpec,
  type YardstickRow,
} from './lib/yardstick.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const BATCHES = [1, 4, 16];
const THREADS = Number(flag('--threads') ?? process.env['BENCH_THREADS'] ?? availableParallelism());
const ROUNDS = Number(flag('--rounds') ?? (quick ? 1 : 3));
const DEPTHS = (flag('--depths') ?? (quick ? '0' : '0,512')).split(',').map(Number);
const NEW_TOKENS = Number(flag('--tokens') ?? (quick ? 16 : 64));
/** Prompt length of the batch 4 and 16 runs. */
const PROMPT_TOKENS = 16;
/** The longer context at which page checks are timed (each decode step checks every page read). */
const LONG_CONTEXT = 1024;
/** Models at most this many weight bytes per token also get the A/B and --kernels wasm runs (they need second engines). */
const EXTRAS_MAX_BYTES = 256 * 2 ** 20;
const SPECS = parseModels(
  flag('--models') ?? process.env['BENCH_MODELS'] ?? (quick ? 'm100:q4_0' : 'm100:q4_0,m100:f16,m100:q4_k_m'),
);

/** `n` distinct prompts of `length` ids each, BOS first. */
const prompts = (n: number, length: number): number[][] =>
  Array.from({ length: n }, (_, i) => [
    1,
    ...Array.from({ length: length - 1 }, (_, j) => 300 + ((i * 7919 + j * 104729) % 31000)),
  ]);

/** Aggregate decode tokens/s of `batch` requests with prompts of `promptTokens`, generating `newTokens` each. */
async function tesseraDecode(engine: Engine, batch: number, promptTokens: number, newTokens: number): Promise<number> {
  const sampling = samplingParams({ maxTokens: newTokens, ignoreEos: true });
  const { timing } = await generate(
    engine.runner,
    prompts(batch, promptTokens).map((promptIds) => ({ promptIds, sampling })),
  );
  return timing.numDecodeTokens / (timing.decodeMs / 1000);
}

/**
 * Page-check cost: the checks one decode step of `batch` requests runs (checkWrite on the page
 * receiving the new slot, checkRead over the context), timed alone, per step.
 */
function pageCheckMicros(engine: Engine, batch: number, contextTokens: number): number {
  const { pool } = engine;
  const owners = Array.from({ length: batch }, (_, i) => ({ rid: asRequestId(`check-${i}`), tenant: DEFAULT_TENANT }));
  const numPages = Math.ceil((contextTokens + 1) / pool.pageSize);
  const tables = owners.map((o) => {
    const a = pool.ledger.allocate(numPages, o);
    if (a.kind !== 'allocated') throw new Error('pool too small for the page-check probe');
    a.tags.forEach((t, p) => pool.stamp(t, Math.min(pool.pageSize, contextTokens - p * pool.pageSize)));
    return a.tags;
  });
  const step = () => {
    for (const [i, o] of owners.entries()) {
      const tags = tables[i] as readonly Tag[];
      pool.checkWrite(
        o,
        tags.slice(Math.floor(contextTokens / pool.pageSize), Math.floor(contextTokens / pool.pageSize) + 1),
      );
      pool.checkRead(o, tags, contextTokens);
    }
  };
  for (let i = 0; i < 200; i++) step();
  const reps = 2000;
  const started = performance.now();
  for (let i = 0; i < reps; i++) step();
  const micros = ((performance.now() - started) * 1000) / reps;
  owners.forEach((o, i) => pool.ledger.free(tables[i]!, o));
  return micros;
}

interface ModelResult {
  readonly spec: BenchModelSpec;
  readonly weightMiB: number;
  /** Measured right before this model's runs: the machine's bandwidth as its runs found it. */
  readonly bandwidthGbPerSecond: number;
  /** The batch-1 ceiling: that bandwidth / weight bytes per token. */
  readonly boundTokensPerSecond: number;
  /** Tessera's batch 4 and 16 decode tok/s (prompts of PROMPT_TOKENS), medians. */
  readonly batched: Record<number, number>;
  /** The same on --kernels wasm (what a CPU without the native addon runs). */
  readonly wasm: Record<number, number>;
  readonly pageChecks: {
    batch: number;
    contextTokens: number;
    checkMicros: number;
    stepMicros: number;
    share: number;
  }[];
  abDecode: { batch: number; withChecks: number; skipPageCheck: number } | null;
}

// --cpu avx2: Tessera's AVX2 kernels against llama.cpp's AVX2 build (scripts/build-llama.mjs --variant avx2).
const CPU = (flag('--cpu') ?? 'auto') as NativeVariantChoice;
if (CPU !== 'auto') selectNativeVariant(CPU);
const found = llamaNativeBin(llamaBuildFor(CPU));
if (!('bin' in found)) process.stderr.write(`llama.cpp's tools are unavailable (${found.why}): Tessera alone\n`);
const bin = 'bin' in found ? found.bin : null;
const examples = flag('--llama-examples') ?? process.env['BENCH_LLAMA_EXAMPLES'];
const batchedExe = examples === undefined ? null : join(examples, 'bin', 'llama-batched-bench');
if (batchedExe !== null && !existsSync(batchedExe))
  throw new Error(`${batchedExe} is missing: node scripts/build-llama.mjs --examples ${examples}`);
const EXPERTS_AB = args.includes('--experts-ab');
/** --experts-ab's figures per model: tok/s medians at batch 1 and 16, experts in place and repacked. */
const expertsAb: { model: string; inPlace: Record<number, number[]>; repacked: Record<number, number[]> }[] = [];
const bandwidths = [await measureReadBandwidth()];
console.log(
  `# Decode benchmark: ${SPECS.map(specLabel).join(', ')}; batch 1 at depths ${DEPTHS.join(', ')}, ` +
    `${NEW_TOKENS} new tokens; ${ROUNDS} interleaved rounds, medians; ${THREADS} threads each`,
);
console.log(
  `machine: ${cpus()[0]?.model ?? '?'} x ${availableParallelism()} threads, load average ` +
    `${loadavg()[0]!.toFixed(1)}; memory read bandwidth ${bandwidths[0]!.gbPerSecond.toFixed(1)} GB/s (measured now; again before each model)`,
);
console.log(`llama.cpp: ${bin ?? 'not built'}`);

const yard: YardstickRow[] = [];
const results: ModelResult[] = [];
let denseLabel = '?';
for (const spec of SPECS) {
  const path = await benchModel(spec);
  const model: LoadedModel = await loadModel(path);
  const maxDepth = Math.max(...DEPTHS, PROMPT_TOKENS);
  const kvPages = Math.max(16 * Math.ceil((LONG_CONTEXT + 1) / 16), 16 * Math.ceil((maxDepth + NEW_TOKENS) / 16)) + 16;
  const engine = await createEngine(model, { kvPages, threads: THREADS });
  denseLabel = `${engine.kernels.dense} dense, ${engine.kernels.ops} ops`;
  const adjacent = await measureReadBandwidth();
  bandwidths.push(adjacent);
  const result: ModelResult = {
    spec,
    weightMiB: engine.weightBytesPerToken / 2 ** 20,
    bandwidthGbPerSecond: adjacent.gbPerSecond,
    boundTokensPerSecond: (adjacent.gbPerSecond * 1e9) / engine.weightBytesPerToken,
    batched: {},
    wasm: {},
    pageChecks: [],
    abDecode: null,
  };
  await tesseraDecode(engine, 1, 16, Math.min(8, NEW_TOKENS)); // warm-up
  for (const depth of DEPTHS) {
    const ours: number[] = [];
    const theirs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      ours.push(await tesseraDecode(engine, 1, Math.max(1, depth), NEW_TOKENS));
      if (bin !== null)
        theirs.push(
          (await llamaBench(bin, { model: path, threads: THREADS, prompt: 0, gen: NEW_TOKENS, depth, reps: 1 }))
            .tokensPerSecond,
        );
    }
    yard.push({
      model: specLabel(spec),
      measure: `batch-1 decode tok/s @ depth ${depth} (tg${NEW_TOKENS})`,
      tessera: median(ours),
      llama: median(theirs),
      tesseraRuns: ours,
      llamaRuns: theirs,
      better: 'higher',
    });
    process.stderr.write(
      `${specLabel(spec)} depth ${depth}: tessera ${ours.map((v) => v.toFixed(1)).join(' ')} | llama.cpp ${theirs.map((v) => v.toFixed(1)).join(' ')}\n`,
    );
  }
  if (batchedExe !== null) {
    // Batch 1 and 16 against llama-batched-bench, rounds interleaved (prompts of PROMPT_TOKENS each).
    const ours: Record<number, number[]> = { 1: [], 16: [] };
    const theirs: Record<number, number[]> = { 1: [], 16: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const b of [1, 16]) ours[b]!.push(await tesseraDecode(engine, b, PROMPT_TOKENS, NEW_TOKENS));
      const runs = await llamaBatchedBench(batchedExe, {
        model: path,
        threads: THREADS,
        prompt: PROMPT_TOKENS,
        gen: NEW_TOKENS,
        parallel: [1, 16],
      });
      for (const r of runs) theirs[r.parallel]!.push(r.tgTokensPerSecond);
    }
    for (const b of [1, 16]) {
      yard.push({
        model: specLabel(spec),
        measure: `batch-${b} decode tok/s, prompts of ${PROMPT_TOKENS} (llama-batched-bench -npl ${b}, tg${NEW_TOKENS})`,
        tessera: median(ours[b]!),
        llama: median(theirs[b]!),
        tesseraRuns: ours[b]!,
        llamaRuns: theirs[b]!,
        better: 'higher',
      });
      process.stderr.write(
        `${specLabel(spec)} batch ${b}: tessera ${ours[b]!.map((v) => v.toFixed(1)).join(' ')} | ` +
          `llama-batched-bench ${theirs[b]!.map((v) => v.toFixed(1)).join(' ')}\n`,
      );
    }
  }
  if (EXPERTS_AB && model.config.moe !== null) {
    const repackedEngine = await createEngine(model, { kvPages, threads: THREADS, expertsInPlace: false });
    await tesseraDecode(repackedEngine, 1, PROMPT_TOKENS, Math.min(8, NEW_TOKENS));
    const ab = {
      model: specLabel(spec),
      inPlace: { 1: [], 16: [] },
      repacked: { 1: [], 16: [] },
    } as (typeof expertsAb)[0];
    for (let round = 0; round < ROUNDS; round++)
      for (const b of [1, 16]) {
        ab.inPlace[b]!.push(await tesseraDecode(engine, b, PROMPT_TOKENS, NEW_TOKENS));
        ab.repacked[b]!.push(await tesseraDecode(repackedEngine, b, PROMPT_TOKENS, NEW_TOKENS));
      }
    expertsAb.push(ab);
    await repackedEngine.dispose();
  }
  for (const b of BATCHES) {
    const runs: number[] = [];
    for (let round = 0; round < (b === 1 ? 1 : ROUNDS); round++)
      runs.push(await tesseraDecode(engine, b, PROMPT_TOKENS, NEW_TOKENS));
    result.batched[b] = median(runs);
  }
  for (const b of BATCHES) {
    const stepMicros = (1e6 * b) / result.batched[b]!;
    for (const contextTokens of [PROMPT_TOKENS + NEW_TOKENS, LONG_CONTEXT]) {
      const checkMicros = pageCheckMicros(engine, b, contextTokens);
      result.pageChecks.push({ batch: b, contextTokens, checkMicros, stepMicros, share: checkMicros / stepMicros });
    }
  }
  const extras = !quick && engine.weightBytesPerToken <= EXTRAS_MAX_BYTES;
  if (extras) {
    const skipping = await createEngine(model, {
      kvPages,
      threads: THREADS,
      faults: new FaultSet(['skip-page-check']),
    });
    await tesseraDecode(skipping, 1, PROMPT_TOKENS, NEW_TOKENS);
    // Interleaved, best of each: the machine's load drifts more than the checks cost.
    const ab = { batch: 1, withChecks: 0, skipPageCheck: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      ab.withChecks = Math.max(ab.withChecks, await tesseraDecode(engine, 1, PROMPT_TOKENS, NEW_TOKENS));
      ab.skipPageCheck = Math.max(ab.skipPageCheck, await tesseraDecode(skipping, 1, PROMPT_TOKENS, NEW_TOKENS));
    }
    result.abDecode = ab;
    await skipping.dispose();
  }
  await engine.dispose();
  if (extras) {
    const wasm = await createEngine(model, { kvPages, threads: THREADS, kernels: 'wasm' });
    await tesseraDecode(wasm, 1, PROMPT_TOKENS, NEW_TOKENS);
    for (const b of BATCHES) result.wasm[b] = await tesseraDecode(wasm, b, PROMPT_TOKENS, NEW_TOKENS);
    await wasm.dispose();
  }
  results.push(result);
}
bandwidths.push(await measureReadBandwidth());

printYardstick(`Batch-1 decode, Tessera (${denseLabel}) vs llama.cpp llama-bench, ${THREADS} threads each`, yard);
const f = (n: number | undefined, digits = 1) => (n === undefined ? '-' : n.toFixed(digits)).padStart(9);
const label = (r: ModelResult) => specLabel(r.spec).padEnd(16);
console.log(
  `\n## Tessera decode tokens/s at batch ${BATCHES.join(', ')} (prompts of ${PROMPT_TOKENS}; all requests together)`,
);
console.log(
  `${'model'.padEnd(16)}${'MiB/tok'.padStart(9)}${'bound'.padStart(9)} | ` +
    `${BATCHES.map((b) => `tessera@${b}`.padStart(11)).join('')} | ${BATCHES.map((b) => `wasm@${b}`.padStart(9)).join('')}`,
);
for (const r of results) {
  console.log(
    `${label(r)}${f(r.weightMiB)}${f(r.boundTokensPerSecond)} | ${BATCHES.map((b) => f(r.batched[b]).padStart(11)).join('')} ` +
      `| ${BATCHES.map((b) => f(r.wasm[b])).join('')}`,
  );
  console.log(
    `${' '.repeat(16)} batch 1: ${((100 * r.batched[1]!) / r.boundTokensPerSecond).toFixed(0)}% of ` +
      `the bandwidth bound (${r.bandwidthGbPerSecond.toFixed(1)} GB/s / weight bytes per token as stored)`,
  );
}
console.log(
  `(wasm: --kernels wasm, the fallback without the native addon (small models only); llama.cpp's ` +
    `batched serving: bench:serve; bandwidths in this run: ${bandwidths.map((b) => b.gbPerSecond.toFixed(1)).join(', ')} GB/s)`,
);
console.log('\n## Page checks per decode step (checkWrite + checkRead for every request), timed alone');
for (const r of results) {
  for (const c of r.pageChecks) {
    console.log(
      `${label(r)} batch ${String(c.batch).padStart(2)}, context ${String(c.contextTokens).padStart(4)}: ` +
        `${c.checkMicros.toFixed(1).padStart(7)} µs of a ${(c.stepMicros / 1000).toFixed(2)} ms step = ${(100 * c.share).toFixed(3)}%`,
    );
  }
  if (r.abDecode !== null)
    console.log(
      `${label(r)} A/B at batch 1: ${r.abDecode.withChecks.toFixed(1)} tok/s with checks, ` +
        `${r.abDecode.skipPageCheck.toFixed(1)} with skip-page-check (${((100 * (r.abDecode.skipPageCheck - r.abDecode.withChecks)) / r.abDecode.skipPageCheck).toFixed(1)}%, within noise unless large)`,
    );
}
for (const ab of expertsAb) {
  const m = (runs: number[]) => `${median(runs).toFixed(1)} (${runs.map((v) => v.toFixed(1)).join(', ')})`;
  console.log(`\n## ${ab.model}: routed experts in place (experts.c) vs repacked, tok/s, rounds interleaved`);
  for (const b of [1, 16]) console.log(`batch ${b}: in place ${m(ab.inPlace[b]!)}; repacked ${m(ab.repacked[b]!)}`);
}
const summary = {
  ...{ threads: THREADS, rounds: ROUNDS, depths: DEPTHS, newTokens: NEW_TOKENS, llama: bin, cpu: cpus()[0]?.model },
  ...{ bandwidths, yardstick: yard.map((r) => ({ ...r, ratio: ratioOf(r) })), results },
  ...{ llamaBatched: batchedExe, expertsAb },
};
const out = join('bench', 'results', `decode-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(join('bench', 'results'), { recursive: true });
await writeFile(out, `${JSON.stringify(summary, null, 2)}\n`);
await writeFile(
  svgPathFor(out),
  groupedBarsSvg({
    title: `Batch-1 decode tokens/s, Tessera vs llama.cpp (llama-bench), ${THREADS} threads each`,
    subtitle: `${cpus()[0]?.model ?? '?'} x ${availableParallelism()}; one run, interleaved, medians`,
    unit: 'tokens/s',
    categories: yard.map((r) => `${r.model} ${r.measure.replace(/ tok\/s.*@ /, ' @')}`),
    series: [
      { name: 'tessera', values: yard.map((r) => r.tessera) },
      { name: 'llama.cpp', values: yard.map((r) => (Number.isFinite(r.llama) ? r.llama : null)) },
    ],
  }),
);
console.log(`\nwrote ${out} and ${svgPathFor(out)}`);
