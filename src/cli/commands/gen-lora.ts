// `tessera gen-lora`: write a random LoRA adapter for a model in llama.cpp's GGUF layout
// (src/engine/lora-gguf.ts), loadable by `tessera serve --lora` and llama.cpp's --lora alike.
// Owns flag parsing only; it must never generate weights itself.
import type { Command } from 'commander';
import { ConfigError } from '../../core/index.js';
import { tesseraHome } from '../config-env.js';
import { readModelConfig } from '../config-model.js';
import { genLoraGguf, LORA_TARGETS, type LoraTarget } from '../../engine/index.js';

interface GenLoraFlags {
  model: string;
  out: string;
  rank: string;
  alpha?: string;
  seed: string;
  dtype: string;
  targets: string;
  strength: string;
}

const DTYPES = ['f32', 'f16', 'q8_0'] as const;

export function registerGenLora(program: Command): void {
  program
    .command('gen-lora')
    .description("write a random LoRA adapter (GGUF, llama.cpp's layout) for a model, for tests, demos and benchmarks")
    .requiredOption('--model <spec>', 'the base model: builtin:NAME, a Hugging Face directory or a .gguf file')
    .requiredOption('--out <file>', 'the adapter .gguf to write')
    .option('--rank <n>', 'LoRA rank', '8')
    .option('--alpha <x>', 'adapter.lora.alpha (default: the rank, so scale 1)')
    .option('--seed <n>', 'random seed', '1')
    .option('--dtype <dtype>', `A and B as ${DTYPES.join(' | ')} (q8_0: rank a multiple of 32)`, 'f32')
    .option(
      '--targets <list>',
      `projections to adapt, comma-separated: ${LORA_TARGETS.join(',')}`,
      LORA_TARGETS.join(','),
    )
    .option('--strength <x>', "B's values uniform in ±strength/sqrt(rank)", '1')
    .action(async (flags: GenLoraFlags) => {
      const dtype = DTYPES.find((d) => d === flags.dtype);
      if (dtype === undefined)
        throw new ConfigError(`--dtype must be one of ${DTYPES.join(', ')}, got "${flags.dtype}"`);
      const targets = flags.targets.split(',');
      const unknown = targets.filter((t) => !(LORA_TARGETS as readonly string[]).includes(t));
      if (unknown.length > 0) throw new ConfigError(`--targets: unknown ${unknown.join(', ')}`);
      const number = (flag: string, value: string): number => {
        const n = Number(value);
        if (!Number.isFinite(n) || n < 0)
          throw new ConfigError(`${flag} must be a non-negative number, got "${value}"`);
        return n;
      };
      const config = await readModelConfig(flags.model, tesseraHome(process.env));
      const count = await genLoraGguf(config, {
        out: flags.out,
        rank: number('--rank', flags.rank),
        ...(flags.alpha === undefined ? {} : { alpha: number('--alpha', flags.alpha) }),
        seed: number('--seed', flags.seed),
        dtype,
        targets: targets as LoraTarget[],
        strength: number('--strength', flags.strength),
      });
      process.stdout.write(
        `wrote a rank-${flags.rank} ${dtype} LoRA adapter (${count} tensors) for ${flags.model} to ${flags.out}\n`,
      );
    });
}
