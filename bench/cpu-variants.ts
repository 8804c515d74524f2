// CPU-variant benchmark (`npm run bench:cpu-variants`): Tessera's native kernels in each
// instruction-set variant against the llama.cpp build of the same class, in one run at equal
// threads: Tessera AVX2 (--cpu avx2) vs llama.cpp's AVX2 build (scripts/build-llama.mjs --variant
// avx2: GGML_NATIVE=OFF, AVX512=OFF, AVX2, FMA, F16C), and Tessera AVX-512 vs llama.cpp native.
// Measures: prefill of a 512-token prompt (llama-bench pp512) and batch-1 decode of 64 tokens
// from an empty context (tg64). One engine per model; the variant is switched between runs (the
// variants share the repacked weights). The four arms take turns each round; medians count.
// Prints the table and writes bench/results/cpu-variants-<time>.json. Asserts nothing about speed.
//
//   node --import ./bench/lib/register-ts.mjs bench/cpu-variants.ts [--rounds N]
//     [--models m100:q4_0,llama-1b:q4_k_m] [--threads N]
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { samplingParams } from '../src/core/index.js';
import { nativeVariant, nativeVariantsHere, selectNativeVariant, type NativeVariant } from '../src/kernels/index.js';
import { createEngine, generate, type Engine } from '../src/engine/index.js';
import { loadModel } from '../src/model/index.js';
import { llamaBench, llamaNativeBin, type LlamaBuild } from './lib/llama-native.js';
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
const THREADS = Number(flag('--threads') ?? process.env['BENCH_THREADS'] ?? availableParallelism());
const ROUNDS = Number(flag('--rounds') ?? 3);
const PROMPT = 512;
const GEN = 64;
const SPECS = parseModels(flag('--models') ?? process.env['BENCH_MODELS'] ?? 'm100:q4_0,llama-1b:q4_k_m');

/** Each Tessera variant this CPU runs, with the llama.cpp build it is measured against. */
const ARMS: { variant: NativeVariant; llama: LlamaBuild }[] = nativeVariantsHere().map((variant) => ({
  variant,
  llama: variant === 'avx2' ? 'avx2' : 'native',
}));
if (ARMS.length === 0) throw new Error('the native addon is unavailable here: nothing to compare');

const bins = new Map<LlamaBuild, string | null>();
for (const { llama } of ARMS) {
  const found = llamaNativeBin(llama);
  if (!('bin' in found)) process.stderr.write(`llama.cpp ${llama} is unavailable (${found.why}): Tessera alone\n`);
  bins.set(llama, 'bin' in found ? found.bin : null);
}

const prompt = [1, ...Array.from({ length: PROMPT - 1 }, (_, j) => 300 + ((j * 104729) % 31000))];

async function tesseraPrefill(engine: Engine): Promise<number> {
  const { timing } = await generate(engine.runner, [
    { promptIds: prompt, sampling: samplingParams({ maxTokens: 1, ignoreEos: true }) },
  ]);
  return PROMPT / (timing.prefillMs / 1000);
}

async function tesseraDecode(engine: Engine): Promise<number> {
  const { timing } = await generate(engine.runner, [
    { promptIds: [1], sampling: samplingParams({ maxTokens: GEN + 1, ignoreEos: true }) },
  ]);
  return timing.numDecodeTokens / (timing.decodeMs / 1000);
}

console.log(
  `# CPU-variant benchmark: ${SPECS.map(specLabel).join(', ')}; pp${PROMPT} and tg${GEN}; ${ROUNDS} interleaved rounds, medians; ${THREADS} threads each`,
);
console.log(
  `machine: ${cpus()[0]?.model ?? '?'} x ${availableParallelism()} threads, load average ${loadavg()[0]!.toFixed(1)}; ` +
    `llama.cpp: ${[...bins].map(([k, v]) => `${k} ${v ?? 'not built'}`).join('; ')}`,
);
const rows: YardstickRow[] = [];
for (const spec of SPECS) {
  const path = await benchModel(spec);
  const engine = await createEngine(await loadModel(path), { kvPages: Math.ceil(PROMPT / 16) + 16, threads: THREADS });
  try {
    const runs = ARMS.map(() => ({
      pp: [] as number[],
      tg: [] as number[],
      llamaPp: [] as number[],
      llamaTg: [] as number[],
    }));
    for (const arm of ARMS) {
      selectNativeVariant(arm.variant);
      await tesseraPrefill(engine); // warm-up
    }
    for (let round = 0; round < ROUNDS; round++)
      for (const [i, arm] of ARMS.entries()) {
        selectNativeVariant(arm.variant);
        if (nativeVariant() !== arm.variant) throw new Error(`variant ${arm.variant} did not take`);
        const r = runs[i]!;
        r.pp.push(await tesseraPrefill(engine));
        r.tg.push(await tesseraDecode(engine));
        const bin = bins.get(arm.llama) ?? null;
        if (bin !== null) {
          const bench = (p: number, n: number) =>
            llamaBench(bin, { model: path, threads: THREADS, prompt: p, gen: n, depth: 0, reps: 1 });
          r.llamaPp.push((await bench(PROMPT, 0)).tokensPerSecond);
          r.llamaTg.push((await bench(0, GEN)).tokensPerSecond);
        }
        const theirs = (v: number[], digits: number) => (bin === null ? '-' : v.at(-1)!.toFixed(digits));
        process.stderr.write(
          `${specLabel(spec)} ${arm.variant} round ${round}: pp ${r.pp.at(-1)!.toFixed(0)} vs ${theirs(r.llamaPp, 0)}, ` +
            `tg ${r.tg.at(-1)!.toFixed(1)} vs ${theirs(r.llamaTg, 1)}\n`,
        );
      }
    for (const [i, arm] of ARMS.entries()) {
      const r = runs[i]!;
      const label = `${specLabel(spec)}, Tessera ${arm.variant} vs llama.cpp ${arm.llama}`;
      rows.push(
        {
          model: label,
          measure: `prefill pp${PROMPT}, tok/s`,
          tessera: median(r.pp),
          llama: median(r.llamaPp),
          tesseraRuns: r.pp,
          llamaRuns: r.llamaPp,
          better: 'higher',
        },
        {
          model: label,
          measure: `decode tg${GEN}, tok/s`,
          tessera: median(r.tg),
          llama: median(r.llamaTg),
          tesseraRuns: r.tg,
          llamaRuns: r.llamaTg,
          better: 'higher',
        },
      );
    }
  } finally {
    await engine.dispose();
  }
}
selectNativeVariant('auto');
printYardstick(`Tessera's native variants vs llama.cpp builds of the same class, ${THREADS} threads each`, rows);
const out = join('bench', 'results', `cpu-variants-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(join('bench', 'results'), { recursive: true });
await writeFile(
  out,
  `${JSON.stringify(
    {
      threads: THREADS,
      rounds: ROUNDS,
      llama: Object.fromEntries(bins),
      cpu: cpus()[0]?.model,
      loadavg: loadavg(),
      rows: rows.map((r) => ({ ...r, ratio: ratioOf(r) })),
    },
    null,
    2,
  )}\n`,
);
console.log(`\nwrote ${out}`);
