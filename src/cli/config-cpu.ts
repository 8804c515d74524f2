// `--cpu auto|avx512|avx2` (or TESSERA_CPU): which instruction-set variant of the native kernels
// every native matmul and attention of this process runs (kernels/native: AVX-512 VNNI, or AVX2 +
// FMA + F16C). 'auto' (the default) leaves the addon's own CPUID choice. A forced variant this CPU
// lacks, or an unknown name, is bad configuration (exit 2); it never falls back silently. The one
// place TESSERA_CPU is read; a forced choice is written back to it so that `tessera up`'s children
// run the same variant.
import type { Command } from 'commander';
import { ConfigError } from '../core/index.js';
import { NATIVE_VARIANT_CHOICES, selectNativeVariant, type NativeVariantChoice } from '../kernels/index.js';

export const CPU_HELP = `native kernel variant: ${NATIVE_VARIANT_CHOICES.join(' | ')} (default: TESSERA_CPU, else auto: the best this CPU runs)`;

/** The --cpu flag's (else TESSERA_CPU's) choice, checked. */
export function parseCpuChoice(flag: string | undefined, env: NodeJS.ProcessEnv): NativeVariantChoice {
  const value = flag ?? env['TESSERA_CPU'] ?? 'auto';
  const source = flag === undefined ? 'TESSERA_CPU' : '--cpu';
  if (!(NATIVE_VARIANT_CHOICES as readonly string[]).includes(value))
    throw new ConfigError(`${source} ${value}: not one of ${NATIVE_VARIANT_CHOICES.join(', ')}`);
  return value as NativeVariantChoice;
}

/** Applies the choice to the process (and its children); 'auto' touches nothing. */
export function applyCpuChoice(choice: NativeVariantChoice, env: NodeJS.ProcessEnv): void {
  if (choice === 'auto') return;
  try {
    selectNativeVariant(choice);
  } catch (cause) {
    throw new ConfigError((cause as Error).message);
  }
  env['TESSERA_CPU'] = choice;
}

/** Registers --cpu on the program: read and applied before any command runs. */
export function registerCpuOption(program: Command): void {
  program.option('--cpu <variant>', CPU_HELP);
  program.hook('preAction', (root) => {
    const flag = root.opts<{ cpu?: string }>().cpu;
    applyCpuChoice(parseCpuChoice(flag, process.env), process.env);
  });
}
