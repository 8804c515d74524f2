// Decode benchmark (`npm run bench:decode`): tokens/s at batch 1, 4 and 16 on gen-model's presets
// (GGUF files generated once into bench/results/models/, gitignored, and reused), Tessera beside
// node-llama-cpp on the same file in the same run: at each batch size the two take turns, several
// rounds, and each side's median counts (the machine's load drifts more than round to round). Also
// the memory-bandwidth bound measured in this run (batch-1 ceiling = bandwidth / weight bytes
// read per token), and the cost of the page checks per decode step. Prints a table and writes
// bench/results/decode-<time>.json. Asserts nothing about speed (a benchmark, not a test).
//
//   node --import ./bench/lib/register-ts.mjs bench/decode.ts [--quick] [--tokens N] [--rounds N]
//     [--models m100,llama-1b] [--dtypes f32,q4_0,q4_k_m]
//   --models (or BENCH_MODELS): presets, default m100. llama-1b is Llama-3.2-1B's shape (~1B
//     parameters; its files take minutes to generate the first time, ~0.7 GB in q4_k_m, 2 GB in f16).
//   --dtypes (or BENCH_DTYPES): for every preset; default m100: f32,q4_0,q4_k_m; llama-1b: q4_0,q4_k_m,f16.
//   BENCH_LLAMA_THREADS: llama.cpp's thread counts to try, best taken (default 1: on a busy 2-core
//     machine its second thread stalls one-token steps). BENCH_THREADS: Tessera's (default all cores).
//   BENCH_MODEL_DIR: where generated files are kept (default bench/results/models).
import { existsSync, renameSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { asRequestId, DEFAULT_TENANT, FaultSet, samplingParams, type Tag } from '../src/core/index.js';
import { GEN_PRESETS, type GenDType, type GenPreset } from '../src/model/index.js';
import { createEngine, generate, genModel, loadModel, type Engine, type LoadedModel } from '../src/model/index.js';
import { measureReadBandwidth } from './lib/bandwidth.js';
import { groupedBarsSvg, svgPathFor } from './lib/svg-plot.js';
import { llamaCppDecode, startLlamaCpp } from './lib/llama-cpp-decode.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const list = (value: string | undefined): string[] | undefined =>
  value === undefined || value === '' ? undefined : value.split(',').map((v) => v.trim());
const quick = args.includes('--quick');
const BATCHES = [1, 4, 16];
const PROMPT_TOKENS = 16;
const THREADS = Number(process.env['BENCH_THREADS'] ?? availableParallelism());
const LLAMA_THREADS = (list(process.env['BENCH_LLAMA_THREADS']) ?? ['1']).map(Number);
const ROUNDS = Number(flag('--rounds') ?? (quick ? 1 : 3));
const MODEL_DIR = process.env['BENCH_MODEL_DIR'] ?? join('bench', 'results', 'models');
/** The longer context at which page checks are timed (each decode step checks every page read). */
const LONG_CONTEXT = 1024;
/** Presets at most this many weight bytes per token also get the A/B and --deterministic runs (they need second engines). */
const EXTRAS_MAX_BYTES = 256 * 2 ** 20;

const DEFAULT_DTYPES: Partial<Record<GenPreset, GenDType[]>> = {
  m100: ['f32', 'q4_0', 'q4_k_m'],
  'llama-1b': ['q4_0', 'q4_k_m', 'f16'],
};
const DEFAULT_TOKENS: Partial<Record<GenPreset, number>> = { 'llama-1b': 32 };

/** Distinct prompts of PROMPT_TOKENS ids each, BOS first. */
const prompts = (n: number): number[][] =>
  Array.from({ length: n }, (_, i) => [
    1,
    ...Array.from({ length: PROMPT_TOKENS - 1 }, (_, j) => 300 + ((i * 7919 + j * 104729) % 31000)),
  ]);

const PRESETS = (list(flag('--models') ?? process.env['BENCH_MODELS']) ?? [flag('--preset') ?? 'm100']) as GenPreset[];
for (const preset of PRESETS)
  if (!(GEN_PRESETS as readonly string[]).includes(preset))
    throw new Error(`--models: ${preset} is not one of ${GEN_PRESETS.join(', ')}`);
const dtypesOf = (preset: GenPreset): GenDType[] =>
  (list(flag('--dtypes') ?? process.env['BENCH_DTYPES']) as GenDType[] | undefined) ??
  DEFAULT_DTYPES[preset] ?? ['f32', 'q4_0'];
const tokensOf = (preset: GenPreset): number =>
  Number(flag('--tokens') ?? (quick ? 16 : (DEFAULT_TOKENS[preset] ?? 64)));
const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** The cached file of preset/dtype, generated (to a temporary name, then renamed) when missing. */
async function benchModel(preset: GenPreset, dtype: GenDType): Promise<string> {
  const path = join(MODEL_DIR, `${preset}-${dtype}-seed0.gguf`);
  if (!existsSync(path)) {
    process.stderr.write(`generating ${path} (once; kept for later runs) ...\n`);
    await mkdir(MODEL_DIR, { recursive: true });
    const partial = path.replace(/\.gguf$/, '.partial.gguf');
    await genModel({ preset, format: 'gguf', out: partial, seed: 0, dtype });
    renameSync(partial, path);
  }
  return path;
}

/** Aggregate decode tokens/s of `batch` requests generating `newTokens` each, one run. */
async function tesseraDecode(engine: Engine, batch: number, newTokens: number): Promise<number> {
  const sampling = samplingParams({ maxTokens: newTokens, ignoreEos: true });
  const { timing } = await generate(
    engine.runner,
    prompts(batch).map((promptIds) => ({ promptIds, sampling })),
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

interface Row {
  preset: GenPreset;
  dtype: GenDType;
  newTokens: number;
  weightMiB: number;
  /** Measured right before this model's runs: the machine's bandwidth as its runs found it. */
  bandwidthGbPerSecond: number;
  /** The batch-1 ceiling: that bandwidth / weight bytes per token. */
  boundTokensPerSecond: number;
  /** Medians over the rounds; every round's figure beside them. */
  tessera: Record<number, number>;
  tesseraRuns: Record<number, number[]>;
  tesseraDeterministic: Record<number, number>;
  llamaCpp: Record<number, number>;
  llamaCppRuns: Record<number, number[]>;
  /** The thread count of llama.cpp's best median at each batch size. */
  llamaCppThreads: Record<number, number>;
  pageChecks: { batch: number; contextTokens: number; checkMicros: number; stepMicros: number; share: number }[];
  abDecode: { batch: number; withChecks: number; skipPageCheck: number } | null;
}

/** Every bandwidth measured in this run; the best is the ceiling hardest to beat. */
const bandwidths = [await measureReadBandwidth()];
const bestBandwidth = () => Math.max(...bandwidths.map((b) => b.gbPerSecond));
const bandwidth = bandwidths[0]!;
console.log(
  `# Decode benchmark: ${PRESETS.join(', ')}, prompts of ${PROMPT_TOKENS} tokens; ${ROUNDS} interleaved rounds per batch, medians`,
);
console.log(
  `machine: ${cpus()[0]?.model ?? '?'} x ${availableParallelism()} threads; memory read bandwidth ${bandwidth.gbPerSecond.toFixed(1)} GB/s (measured now; again before each model)`,
);

const llama = await startLlamaCpp();
const rows: Row[] = [];
/** The dense kernels the engines ran (engine.kernels.dense of the last one made). */
let denseLabel = '?';
for (const preset of PRESETS) {
  const newTokens = tokensOf(preset);
  for (const dtype of dtypesOf(preset)) {
    const path = await benchModel(preset, dtype);
    const model: LoadedModel = await loadModel(path);
    const kvPages = 16 * Math.ceil((LONG_CONTEXT + 1) / 16) + 16; // the page-check probe's 16 long contexts
    const engine = await createEngine(model, { kvPages, threads: THREADS });
    denseLabel =
      engine.kernels.dense === 'native'
        ? 'native (onnxruntime for f16/bf16 batches over 64 rows)'
        : engine.kernels.dense;
    const extras = !quick && engine.weightBytesPerToken <= EXTRAS_MAX_BYTES;
    const theirs = await llama.loadModel({ modelPath: path });
    const adjacent = await measureReadBandwidth();
    bandwidths.push(adjacent);
    const row: Row = {
      preset,
      dtype,
      newTokens,
      weightMiB: engine.weightBytesPerToken / 2 ** 20,
      bandwidthGbPerSecond: adjacent.gbPerSecond,
      boundTokensPerSecond: (adjacent.gbPerSecond * 1e9) / engine.weightBytesPerToken,
      tessera: {},
      tesseraRuns: {},
      tesseraDeterministic: {},
      llamaCpp: {},
      llamaCppRuns: {},
      llamaCppThreads: {},
      pageChecks: [],
      abDecode: null,
    };
    const llamaRun = async (b: number, threads: number) =>
      (await llamaCppDecode(theirs, prompts(b), newTokens, threads)).tokensPerSecond;
    // Warm-ups, then at each batch size the two take turns, ROUNDS times; medians count.
    await tesseraDecode(engine, 1, Math.min(8, newTokens));
    for (const threads of LLAMA_THREADS) await llamaRun(1, threads);
    for (const b of BATCHES) {
      const ours: number[] = [];
      const theirsByThreads = new Map<number, number[]>(LLAMA_THREADS.map((t) => [t, []]));
      for (let round = 0; round < ROUNDS; round++) {
        ours.push(await tesseraDecode(engine, b, newTokens));
        for (const threads of LLAMA_THREADS) theirsByThreads.get(threads)!.push(await llamaRun(b, threads));
      }
      row.tesseraRuns[b] = ours;
      row.tessera[b] = median(ours);
      for (const [threads, runs] of theirsByThreads) {
        if (median(runs) > (row.llamaCpp[b] ?? 0)) {
          row.llamaCpp[b] = median(runs);
          row.llamaCppRuns[b] = runs;
          row.llamaCppThreads[b] = threads;
        }
      }
      process.stderr.write(
        `${preset} ${dtype} batch ${b}: tessera ${ours.map((v) => v.toFixed(1)).join(' ')} | llama.cpp ${row.llamaCppRuns[b]!.map((v) => v.toFixed(1)).join(' ')}\n`,
      );
    }
    await theirs.dispose();
    for (const b of BATCHES) {
      const stepMicros = (1e6 * b) / row.tessera[b]!;
      for (const contextTokens of [PROMPT_TOKENS + newTokens, LONG_CONTEXT]) {
        const checkMicros = pageCheckMicros(engine, b, contextTokens);
        row.pageChecks.push({ batch: b, contextTokens, checkMicros, stepMicros, share: checkMicros / stepMicros });
      }
    }
    if (extras) {
      const skipping = await createEngine(model, {
        kvPages,
        threads: THREADS,
        faults: new FaultSet(['skip-page-check']),
      });
      await tesseraDecode(skipping, 1, newTokens);
      // Interleaved, best of each: the machine's load drifts more than the checks cost.
      const ab = { batch: 1, withChecks: 0, skipPageCheck: 0 };
      for (let round = 0; round < ROUNDS; round++) {
        ab.withChecks = Math.max(ab.withChecks, await tesseraDecode(engine, 1, newTokens));
        ab.skipPageCheck = Math.max(ab.skipPageCheck, await tesseraDecode(skipping, 1, newTokens));
      }
      row.abDecode = ab;
      await skipping.dispose();
    }
    await engine.dispose();
    if (extras) {
      const det = await createEngine(model, { kvPages, threads: THREADS, deterministic: true });
      await tesseraDecode(det, 1, newTokens);
      for (const b of BATCHES) row.tesseraDeterministic[b] = await tesseraDecode(det, b, newTokens);
      await det.dispose();
    }
    rows.push(row);
  }
}
await llama.dispose();
bandwidths.push(await measureReadBandwidth());

const f = (n: number | undefined, digits = 1) => (n === undefined ? '-' : n.toFixed(digits)).padStart(9);
const label = (r: Row) => `${r.preset} ${r.dtype}`.padEnd(16);
console.log('\n## Decode tokens/s (all requests together; medians of the interleaved rounds)');
console.log(
  `${'model'.padEnd(16)}${'MiB/tok'.padStart(9)}${'bound'.padStart(9)} | ${BATCHES.map((b) => `tessera@${b}`.padStart(11)).join('')} | ${BATCHES.map((b) => `llama@${b}`.padStart(10)).join('')} | ${BATCHES.map((b) => `det@${b}`.padStart(9)).join('')}`,
);
for (const r of rows) {
  console.log(
    `${label(r)}${f(r.weightMiB)}${f(r.boundTokensPerSecond)} | ${BATCHES.map((b) => f(r.tessera[b]).padStart(11)).join('')} | ` +
      `${BATCHES.map((b) => f(r.llamaCpp[b]).padStart(10)).join('')} | ${BATCHES.map((b) => f(r.tesseraDeterministic[b])).join('')}`,
  );
}
console.log(
  `(tessera: ${THREADS} threads, ${denseLabel} dense + wasm ops; det: --deterministic, wasm dense (small presets only); llama: node-llama-cpp, best median of ${LLAMA_THREADS.join(', ')} thread(s);`,
);
console.log(
  ` new tokens per request: ${PRESETS.map((p) => `${p} ${tokensOf(p)}`).join(', ')}; bound: bandwidth measured right before the model's runs / weight bytes per token as stored: the batch-1 ceiling;`,
);
console.log(
  ` all bandwidths measured in this run: ${bandwidths.map((b) => b.gbPerSecond.toFixed(1)).join(', ')} GB/s)`,
);
console.log(
  '\n## Against the targets (quantized: batch 1 >= 1.0x and batch 16 >= 1.5x llama.cpp; f32/f16: batch 1 >= 90% of the bound)',
);
for (const r of rows) {
  const llamaBest = Math.max(...Object.values(r.llamaCpp));
  const strict = (100 * r.tessera[1]! * r.weightMiB * 2 ** 20) / (bestBandwidth() * 1e9);
  console.log(
    `${label(r)} batch 1: ${((100 * r.tessera[1]!) / r.boundTokensPerSecond).toFixed(0)}% of the bandwidth bound (${strict.toFixed(0)}% of the run's best bandwidth); ` +
      `ratio to llama.cpp at 1/4/16: ${BATCHES.map((b) => (r.tessera[b]! / r.llamaCpp[b]!).toFixed(2)).join(' / ')}; ` +
      `batch 16: ${(r.tessera[16]! / llamaBest).toFixed(2)}x llama.cpp's best at any batch (${llamaBest.toFixed(1)} tok/s)`,
  );
}
console.log('\n## Page checks per decode step (checkWrite + checkRead for every request), timed alone');
for (const r of rows) {
  for (const c of r.pageChecks) {
    console.log(
      `${label(r)} batch ${String(c.batch).padStart(2)}, context ${String(c.contextTokens).padStart(4)}: ${c.checkMicros.toFixed(1).padStart(7)} µs of a ${(c.stepMicros / 1000).toFixed(2)} ms step = ${(100 * c.share).toFixed(3)}%`,
    );
  }
  if (r.abDecode !== null)
    console.log(
      `${label(r)} A/B at batch 1: ${r.abDecode.withChecks.toFixed(1)} tok/s with checks, ${r.abDecode.skipPageCheck.toFixed(1)} with skip-page-check (${((100 * (r.abDecode.skipPageCheck - r.abDecode.withChecks)) / r.abDecode.skipPageCheck).toFixed(1)}%, within noise unless large)`,
    );
}
const out = join('bench', 'results', `decode-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(join('bench', 'results'), { recursive: true });
await writeFile(
  out,
  `${JSON.stringify({ promptTokens: PROMPT_TOKENS, rounds: ROUNDS, threads: THREADS, llamaThreads: LLAMA_THREADS, cpu: cpus()[0]?.model, bandwidths, rows }, null, 2)}\n`,
);
const at = (values: Record<number, number>) => BATCHES.map((b) => values[b] ?? null);
await writeFile(
  svgPathFor(out),
  groupedBarsSvg({
    title: `Decode tokens/s, all requests together (${PRESETS.join(', ')})`,
    subtitle: `prompts of ${PROMPT_TOKENS}; ${cpus()[0]?.model ?? '?'} x ${availableParallelism()}; one run, interleaved, medians`,
    unit: 'tokens/s',
    categories: BATCHES.map((b) => `batch ${b}`),
    series: rows.flatMap((r) => [
      { name: `tessera ${r.preset} ${r.dtype}`, values: at(r.tessera) },
      { name: `llama.cpp ${r.preset} ${r.dtype}`, values: at(r.llamaCpp) },
      ...(Object.keys(r.tesseraDeterministic).length === 0
        ? []
        : [{ name: `tessera --deterministic ${r.preset} ${r.dtype}`, values: at(r.tesseraDeterministic) }]),
      {
        name: `bandwidth bound ${r.preset} ${r.dtype}`,
        values: BATCHES.map((b) => (b === 1 ? r.boundTokensPerSecond : null)),
      },
    ]),
  }),
);
console.log(`\nwrote ${out} and ${svgPathFor(out)}`);
