// What bench:decode, bench:prefill and bench:serve share for their comparison with llama.cpp:
// the GGUF files they run (gen-model presets, generated once into BENCH_MODEL_DIR and reused),
// the model list they take (--models m100:q4_0,llama-1b:q4_k_m), medians, and the table they
// print (model | measure | Tessera | llama.cpp | ratio). Benchmark code; it measures nothing.
import { existsSync, renameSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { GEN_PRESETS, genModel, type GenDType, type GenPreset } from '../../src/gen/index.js';

export const MODEL_DIR = process.env['BENCH_MODEL_DIR'] ?? join('bench', 'results', 'models');

export interface BenchModelSpec {
  readonly preset: GenPreset;
  readonly dtype: GenDType;
}

/** `m100:q4_0,llama-1b:q4_k_m` (a preset alone: q4_0). */
export function parseModels(value: string): BenchModelSpec[] {
  return value.split(',').map((entry) => {
    const [preset, dtype = 'q4_0'] = entry.trim().split(':') as [GenPreset, GenDType | undefined];
    if (!(GEN_PRESETS as readonly string[]).includes(preset))
      throw new Error(`--models: ${preset} is not one of ${GEN_PRESETS.join(', ')}`);
    return { preset, dtype };
  });
}

export const specLabel = (s: BenchModelSpec): string => `${s.preset} ${s.dtype}`;

/** The cached file of preset/dtype, generated (to a temporary name, then renamed) when missing. */
export async function benchModel(s: BenchModelSpec): Promise<string> {
  const path = join(MODEL_DIR, `${s.preset}-${s.dtype}-seed0.gguf`);
  if (!existsSync(path)) {
    process.stderr.write(`generating ${path} (once; kept for later runs) ...\n`);
    await mkdir(MODEL_DIR, { recursive: true });
    const partial = path.replace(/\.gguf$/, '.partial.gguf');
    await genModel({ preset: s.preset, format: 'gguf', out: partial, seed: 0, dtype: s.dtype });
    renameSync(partial, path);
  }
  return path;
}

export const median = (values: readonly number[]): number => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export interface YardstickRow {
  readonly model: string;
  readonly measure: string;
  /** Medians (NaN: not measured). */
  readonly tessera: number;
  readonly llama: number;
  /** Every round's figure. */
  readonly tesseraRuns: readonly number[];
  readonly llamaRuns: readonly number[];
  /** 'higher' (throughput) or 'lower' (latency) is better: the ratio is always Tessera's advantage (>1 ahead). */
  readonly better: 'higher' | 'lower';
}

export function ratioOf(r: YardstickRow): number {
  return r.better === 'higher' ? r.tessera / r.llama : r.llama / r.tessera;
}

/** The comparison table, markdown, with every round's figures beside the medians. */
export function printYardstick(title: string, rows: readonly YardstickRow[]): void {
  const f = (n: number) => (Number.isFinite(n) ? (n >= 100 ? n.toFixed(0) : n.toFixed(1)) : '-');
  const runs = (xs: readonly number[]) => (xs.length > 1 ? ` (${xs.map(f).join(', ')})` : '');
  console.log(`\n## ${title}`);
  console.log('| model | measure | Tessera | llama.cpp | ratio |');
  console.log('|---|---|---|---|---|');
  for (const r of rows) {
    const ratio = ratioOf(r);
    console.log(
      `| ${r.model} | ${r.measure} | ${f(r.tessera)}${runs(r.tesseraRuns)} | ${f(r.llama)}${runs(r.llamaRuns)} | ${Number.isFinite(ratio) ? `${ratio.toFixed(2)}x` : '-'} |`,
    );
  }
}
