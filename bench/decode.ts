// Decode benchmark (`npm run bench:decode`): tokens/s at batch 1, 4 and 16 on gen-model's m100
// (f32 and q4_0 GGUF, generated into $TESSERA_HOME/bench/ when missing), Tessera beside
// node-llama-cpp on the same file in the same run, with the memory-bandwidth bound measured in
// this run (batch-1 ceiling = bandwidth / weight bytes read per token), and the cost of the page
// checks per decode step. Prints a table and writes bench/results/decode-<time>.json.
// Asserts nothing about speed (a benchmark, not a test).
//
//   node --import ./bench/lib/register-ts.mjs bench/decode.ts [--quick] [--tokens N] [--dtypes f32,q4_0,q4_k_m]
//     [--preset m100|llama-1b]   (llama-1b: Llama-3.2-1B's shape, ~1B parameters; try --dtypes q4_k_m,f16)
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, homedir } from 'node:os';
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
const quick = args.includes('--quick');
const NEW_TOKENS = Number(flag('--tokens') ?? (quick ? 16 : 64));
const DTYPES = (flag('--dtypes') ?? 'f32,q4_0').split(',') as GenDType[];
const BATCHES = [1, 4, 16];
const PROMPT_TOKENS = 16;
const THREADS = availableParallelism();
/** The longer context at which page checks are timed (each decode step checks every page read). */
const LONG_CONTEXT = 1024;

/** Distinct prompts of PROMPT_TOKENS ids each, BOS first. */
const prompts = (n: number): number[][] =>
  Array.from({ length: n }, (_, i) => [
    1,
    ...Array.from({ length: PROMPT_TOKENS - 1 }, (_, j) => 300 + ((i * 7919 + j * 104729) % 31000)),
  ]);

const PRESET = (flag('--preset') ?? 'm100') as GenPreset;
if (!(GEN_PRESETS as readonly string[]).includes(PRESET))
  throw new Error(`--preset must be one of ${GEN_PRESETS.join(', ')}`);

async function benchModel(dtype: GenDType): Promise<string> {
  const dir = join(process.env['TESSERA_HOME'] ?? join(homedir(), '.cache', 'tessera'), 'bench');
  const path = join(dir, `${PRESET}-${dtype}-seed0.gguf`);
  if (!existsSync(path)) {
    process.stderr.write(`generating ${path} ...\n`);
    await mkdir(dir, { recursive: true });
    await genModel({ preset: PRESET, format: 'gguf', out: path, seed: 0, dtype });
  }
  return path;
}

/** Aggregate decode tokens/s of `batch` requests generating NEW_TOKENS each (best of `runs`: other load on the machine only slows a run down). */
async function tesseraDecode(engine: Engine, batch: number, runs = quick ? 1 : 3): Promise<number> {
  let best = 0;
  for (let r = 0; r < runs; r++) {
    const sampling = samplingParams({ maxTokens: NEW_TOKENS, ignoreEos: true });
    const { timing } = await generate(
      engine.runner,
      prompts(batch).map((promptIds) => ({ promptIds, sampling })),
    );
    best = Math.max(best, timing.numDecodeTokens / (timing.decodeMs / 1000));
  }
  return best;
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
  dtype: GenDType;
  weightMiB: number;
  /** Measured right before this model's runs: the machine's bandwidth as its runs found it. */
  bandwidthGbPerSecond: number;
  /** The batch-1 ceiling: that bandwidth / weight bytes per token. */
  boundTokensPerSecond: number;
  tessera: Record<number, number>;
  tesseraDeterministic: Record<number, number>;
  llamaCpp: Record<number, number>;
  /** The thread count of llama.cpp's best run at each batch size. */
  llamaCppThreads: Record<number, number>;
  pageChecks: { batch: number; contextTokens: number; checkMicros: number; stepMicros: number; share: number }[];
  abDecode: { batch: number; withChecks: number; skipPageCheck: number };
}

/** Every bandwidth measured in this run; the best is the ceiling hardest to beat. */
const bandwidths = [await measureReadBandwidth()];
const bestBandwidth = () => Math.max(...bandwidths.map((b) => b.gbPerSecond));
const bandwidth = bandwidths[0]!;
console.log(`# Decode benchmark: ${PRESET}, ${NEW_TOKENS} new tokens per request, prompts of ${PROMPT_TOKENS} tokens`);
console.log(
  `machine: ${cpus()[0]?.model ?? '?'} x ${THREADS} threads; memory read bandwidth ${bandwidth.gbPerSecond.toFixed(1)} GB/s (measured now; again before each model)`,
);

const llama = await startLlamaCpp();
const rows: Row[] = [];
for (const dtype of DTYPES) {
  const path = await benchModel(dtype);
  const model: LoadedModel = await loadModel(path);
  const kvPages = 16 * Math.ceil((LONG_CONTEXT + 1) / 16) + 16; // the page-check probe's 16 long contexts
  const engine = await createEngine(model, { kvPages, threads: THREADS });
  const adjacent = await measureReadBandwidth();
  bandwidths.push(adjacent);
  const row: Row = {
    dtype,
    weightMiB: engine.weightBytesPerToken / 2 ** 20,
    bandwidthGbPerSecond: adjacent.gbPerSecond,
    boundTokensPerSecond: (adjacent.gbPerSecond * 1e9) / engine.weightBytesPerToken,
    tessera: {},
    tesseraDeterministic: {},
    llamaCpp: {},
    llamaCppThreads: {},
    pageChecks: [],
    abDecode: { batch: 1, withChecks: 0, skipPageCheck: 0 },
  };
  await tesseraDecode(engine, 1, 1); // warm-up
  for (const b of BATCHES) row.tessera[b] = await tesseraDecode(engine, b);
  for (const b of BATCHES) {
    const stepMicros = (1e6 * b) / row.tessera[b]!;
    for (const contextTokens of [PROMPT_TOKENS + NEW_TOKENS, LONG_CONTEXT]) {
      const checkMicros = pageCheckMicros(engine, b, contextTokens);
      row.pageChecks.push({ batch: b, contextTokens, checkMicros, stepMicros, share: checkMicros / stepMicros });
    }
  }
  const skipping = await createEngine(model, { kvPages, threads: THREADS, faults: new FaultSet(['skip-page-check']) });
  await tesseraDecode(skipping, 1, 1);
  // Interleaved, best of each: the machine's load drifts more than the checks cost.
  for (let round = 0; round < (quick ? 1 : 3); round++) {
    row.abDecode.withChecks = Math.max(row.abDecode.withChecks, await tesseraDecode(engine, 1, 1));
    row.abDecode.skipPageCheck = Math.max(row.abDecode.skipPageCheck, await tesseraDecode(skipping, 1, 1));
  }
  await skipping.dispose();
  await engine.dispose();
  if (!quick) {
    const det = await createEngine(model, { kvPages, threads: THREADS, deterministic: true });
    await tesseraDecode(det, 1, 1);
    for (const b of BATCHES) row.tesseraDeterministic[b] = await tesseraDecode(det, b, 1);
    await det.dispose();
  }
  const theirs = await llama.loadModel({ modelPath: path });
  // Its best over thread counts. On a busy machine llama.cpp's spinning threads can collapse
  // (10x slower): a thread count under half the best at batch 1 is not tried at larger batches.
  const candidates = [...new Set([1, THREADS])];
  const atBatch1 = new Map<number, number>();
  const llamaBest = async (b: number, threads: number): Promise<number> => {
    let best = 0;
    for (let r = 0; r < (quick ? 1 : 2); r++)
      best = Math.max(best, (await llamaCppDecode(theirs, prompts(b), NEW_TOKENS, threads)).tokensPerSecond);
    return best;
  };
  for (const threads of candidates) atBatch1.set(threads, await llamaBest(1, threads));
  const best1 = Math.max(...atBatch1.values());
  for (const b of BATCHES) {
    for (const threads of candidates.filter((t) => atBatch1.get(t)! >= best1 / 2)) {
      const tokensPerSecond = b === 1 ? atBatch1.get(threads)! : await llamaBest(b, threads);
      if (tokensPerSecond > (row.llamaCpp[b] ?? 0)) {
        row.llamaCpp[b] = tokensPerSecond;
        row.llamaCppThreads[b] = threads;
      }
    }
  }
  await theirs.dispose();
  rows.push(row);
}
await llama.dispose();
bandwidths.push(await measureReadBandwidth());

const f = (n: number | undefined, digits = 1) => (n === undefined ? '-' : n.toFixed(digits)).padStart(9);
console.log('\n## Decode tokens/s (all requests together)');
console.log(
  `${'dtype'.padEnd(6)}${'MiB/tok'.padStart(9)}${'bound'.padStart(9)} | ${BATCHES.map((b) => `tessera@${b}`.padStart(11)).join('')} | ${BATCHES.map((b) => `llama@${b}`.padStart(10)).join('')} | ${BATCHES.map((b) => `det@${b}`.padStart(9)).join('')}`,
);
for (const r of rows) {
  console.log(
    `${r.dtype.padEnd(6)}${f(r.weightMiB)}${f(r.boundTokensPerSecond)} | ${BATCHES.map((b) => f(r.tessera[b]).padStart(11)).join('')} | ` +
      `${BATCHES.map((b) => f(r.llamaCpp[b]).padStart(10)).join('')} | ${BATCHES.map((b) => f(r.tesseraDeterministic[b])).join('')}`,
  );
}
console.log(
  `(tessera: ${THREADS} threads, onnxruntime dense + wasm ops; det: --deterministic, wasm dense; llama: node-llama-cpp, best of 1 and ${THREADS} threads;`,
);
console.log(
  ` bound: bandwidth measured right before the model's runs / weight bytes per token as stored: the batch-1 ceiling;`,
);
console.log(
  ` all bandwidths measured in this run: ${bandwidths.map((b) => b.gbPerSecond.toFixed(1)).join(', ')} GB/s)`,
);
console.log('\n## Against the targets');
for (const r of rows) {
  const llamaBest = Math.max(...Object.values(r.llamaCpp));
  const strict = (100 * r.tessera[1]! * r.weightMiB * 2 ** 20) / (bestBandwidth() * 1e9);
  console.log(
    `${r.dtype.padEnd(6)} batch 1: ${((100 * r.tessera[1]!) / r.boundTokensPerSecond).toFixed(0)}% of the bandwidth bound (target >= 90%; ${strict.toFixed(0)}% of the run's best bandwidth); ` +
      `batch 16: ${(r.tessera[16]! / llamaBest).toFixed(2)}x llama.cpp's best (${llamaBest.toFixed(1)} tok/s; target >= 1.5x); ` +
      `ratio to llama.cpp at 1/4/16: ${BATCHES.map((b) => (r.tessera[b]! / r.llamaCpp[b]!).toFixed(2)).join(' / ')}`,
  );
}
console.log('\n## Page checks per decode step (checkWrite + checkRead for every request), timed alone');
for (const r of rows) {
  for (const c of r.pageChecks) {
    console.log(
      `${r.dtype.padEnd(6)} batch ${String(c.batch).padStart(2)}, context ${String(c.contextTokens).padStart(4)}: ${c.checkMicros.toFixed(1).padStart(7)} µs of a ${(c.stepMicros / 1000).toFixed(2)} ms step = ${(100 * c.share).toFixed(3)}%`,
    );
  }
  console.log(
    `${r.dtype.padEnd(6)} A/B at batch 1: ${r.abDecode.withChecks.toFixed(1)} tok/s with checks, ${r.abDecode.skipPageCheck.toFixed(1)} with skip-page-check (${((100 * (r.abDecode.skipPageCheck - r.abDecode.withChecks)) / r.abDecode.skipPageCheck).toFixed(1)}%, within noise unless large)`,
  );
}
const out = join('bench', 'results', `decode-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(join('bench', 'results'), { recursive: true });
await writeFile(
  out,
  `${JSON.stringify({ newTokens: NEW_TOKENS, promptTokens: PROMPT_TOKENS, threads: THREADS, cpu: cpus()[0]?.model, bandwidths, rows }, null, 2)}\n`,
);
const at = (values: Record<number, number>) => BATCHES.map((b) => values[b] ?? null);
await writeFile(
  svgPathFor(out),
  groupedBarsSvg({
    title: 'Decode tokens/s, all requests together (m100)',
    subtitle: `${NEW_TOKENS} new tokens per request, prompts of ${PROMPT_TOKENS}; ${cpus()[0]?.model ?? '?'} x ${THREADS}; one run, side by side`,
    unit: 'tokens/s',
    categories: BATCHES.map((b) => `batch ${b}`),
    series: rows.flatMap((r) => [
      { name: `tessera ${r.dtype}`, values: at(r.tessera) },
      { name: `llama.cpp ${r.dtype}`, values: at(r.llamaCpp) },
      ...(Object.keys(r.tesseraDeterministic).length === 0
        ? []
        : [{ name: `tessera --deterministic ${r.dtype}`, values: at(r.tesseraDeterministic) }]),
      { name: `bandwidth bound ${r.dtype}`, values: BATCHES.map((b) => (b === 1 ? r.boundTokensPerSecond : null)) },
    ]),
  }),
);
console.log(`\nwrote ${out} and ${svgPathFor(out)}`);
