// `tessera gen-model`: write a deterministic random-weight model (src/gen/gen-model.ts) and
// report what was written. Owns flag parsing and the progress display (a bar on a TTY, plain
// lines otherwise); it must never generate weights itself.
import { stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { ConfigError } from '../../core/index.js';
import { GEN_DTYPES, GEN_PRESETS, genModel, type GenFormat, type GenProgress } from '../../gen/index.js';

const FORMATS: readonly GenFormat[] = ['hf', 'gguf'];
const DTYPES = GEN_DTYPES;

interface GenModelFlags {
  preset: string;
  format: string;
  out: string;
  seed: string;
  dtype: string;
  layers?: string;
}

export function registerGenModel(program: Command): void {
  program
    .command('gen-model')
    .description(
      'write a deterministic random-weight Llama model (Hugging Face directory or GGUF file) for tests, demos and benchmarks',
    )
    .requiredOption('--preset <name>', `model size: ${GEN_PRESETS.join(' | ')}`)
    .requiredOption('--format <format>', `hf (a directory) | gguf (one .gguf file)`)
    .requiredOption('--out <path>', 'a directory for hf, a .gguf file for gguf')
    .option('--seed <n>', 'random seed: the same seed gives the same weights in both formats', '0')
    .option(
      '--dtype <dtype>',
      `weight type: ${DTYPES.join(' | ')} (q8_0, q4_0 and the K-quant mixes q4_k_m, q5_k_m, q6_k as llama.cpp makes them: gguf only)`,
      'f32',
    )
    .option(
      '--layers <n>',
      "keep only the preset's first n layers, with the same weights (same seed): a self-speculative draft model " +
        'for the full preset (--draft-model)',
    )
    .action(async (flags: GenModelFlags) => {
      const preset = pick(flags.preset, GEN_PRESETS, '--preset');
      const format = pick(flags.format, FORMATS, '--format');
      const dtype = pick(flags.dtype, DTYPES, '--dtype');
      if (!/^\d+$/.test(flags.seed)) throw new ConfigError(`--seed must be a non-negative integer, got ${flags.seed}`);
      if (flags.layers !== undefined && !/^[1-9]\d*$/.test(flags.layers))
        throw new ConfigError(`--layers must be a positive integer, got ${flags.layers}`);
      const started = performance.now();
      const display = progressDisplay(process.stderr);
      const result = await genModel({
        preset,
        format,
        dtype,
        out: flags.out,
        seed: Number(flags.seed),
        ...(flags.layers === undefined ? {} : { overrides: { numLayers: Number(flags.layers) } }),
        onProgress: display.update,
      });
      display.done();
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      process.stdout.write(
        `wrote ${preset}${flags.layers === undefined ? '' : ` (first ${flags.layers} layers)`} ` +
          `(${result.parameters.toLocaleString('en-US')} parameters, ${dtype}, seed ${flags.seed}) to ${result.path} in ${seconds} s\n`,
      );
      for (const file of result.files) process.stdout.write(`  ${file}  ${formatBytes((await stat(file)).size)}\n`);
    });
}

function pick<T extends string>(value: string, allowed: readonly T[], flag: string): T {
  if (!(allowed as readonly string[]).includes(value))
    throw new ConfigError(`${flag} must be one of ${allowed.join(', ')}, got "${value}"`);
  return value as T;
}

function formatBytes(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e3).toFixed(1)} kB`;
}

interface ProgressDisplay {
  update: (p: GenProgress) => void;
  done: () => void;
}

/** A one-line bar redrawn in place on a TTY; on anything else, a plain line every 10%. */
export function progressDisplay(stream: NodeJS.WriteStream): ProgressDisplay {
  const width = 30;
  let lastTenth = -1;
  let drawn = false;
  return {
    update(p) {
      const fraction = p.totalBytes === 0 ? 1 : p.doneBytes / p.totalBytes;
      const percent = Math.floor(fraction * 100);
      if (stream.isTTY) {
        const filled = Math.round(fraction * width);
        const bar = `${'#'.repeat(filled)}${'.'.repeat(width - filled)}`;
        stream.write(
          `\r[${bar}] ${String(percent).padStart(3)}%  ${formatBytes(p.doneBytes)} / ${formatBytes(p.totalBytes)}  ${p.tensor}\x1b[K`,
        );
        drawn = true;
        return;
      }
      const tenth = Math.floor(fraction * 10);
      if (tenth > lastTenth) {
        lastTenth = tenth;
        stream.write(`gen-model: ${percent}% (${formatBytes(p.doneBytes)} of ${formatBytes(p.totalBytes)})\n`);
      }
    },
    done() {
      if (drawn) stream.write('\n');
    },
  };
}
