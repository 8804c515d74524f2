// Built-in models, named `builtin:NAME`:
//   builtin:tiny    gen-model's tiny preset (HF, f32, seed 0), generated on first use into
//                   <cacheDir>/models/ and reused after. Written into a temporary directory and
//                   renamed into place, so a reader never sees a half-written model, and two
//                   processes starting at once both end up with one complete copy.
//   builtin:austen  models/austen/ inside the package (a small trained model).
// It must never write outside cacheDir, and never modify a finished model directory.
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError, ModelLoadError } from '../core/index.js';
import { exists } from '../formats/index.js';
import { genModel, type GenProgress } from '../gen/index.js';
import { packageRoot } from './package-root.js';

export const BUILTIN_MODELS = ['tiny', 'austen'] as const;
export type BuiltinModel = (typeof BUILTIN_MODELS)[number];

/** Bump when gen-model's output for builtin:tiny changes, so old caches are not reused. */
export const BUILTIN_TINY_VERSION = 1;
export const BUILTIN_TINY_SEED = 0;

export interface BuiltinOptions {
  /** Where generated models are kept (the CLI passes TESSERA_HOME, default ~/.cache/tessera). */
  readonly cacheDir: string;
  readonly onProgress?: (progress: GenProgress) => void;
  /** Where builtin:austen is looked for; Tessera's package root unless a test says otherwise. */
  readonly packageRoot?: string;
}

export function isBuiltinSpec(spec: string): boolean {
  return spec.startsWith('builtin:');
}

/** builtin:NAME -> the directory holding that model, generating it first if needed. */
export async function resolveBuiltinModel(spec: string, options: Partial<BuiltinOptions>): Promise<string> {
  const name = spec.slice('builtin:'.length);
  switch (name) {
    case 'tiny':
      if (options.cacheDir === undefined)
        throw new ConfigError(`${spec} needs a cache directory to generate into (TESSERA_HOME)`);
      return ensureBuiltinTiny({
        cacheDir: options.cacheDir,
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      });
    case 'austen': {
      const dir = join(options.packageRoot ?? packageRoot(), 'models', 'austen');
      if (!(await exists(join(dir, 'config.json')))) {
        throw new ModelLoadError(
          dir,
          `${spec} is not installed: this package has no models/austen/ model (config.json missing)`,
        );
      }
      return dir;
    }
    default:
      throw new ModelLoadError(
        spec,
        `unknown built-in model (known: ${BUILTIN_MODELS.map((m) => `builtin:${m}`).join(', ')})`,
      );
  }
}

export function builtinTinyDir(cacheDir: string): string {
  return join(cacheDir, 'models', `builtin-tiny-v${BUILTIN_TINY_VERSION}`);
}

async function ensureBuiltinTiny(options: BuiltinOptions): Promise<string> {
  const final = builtinTinyDir(options.cacheDir);
  if (await exists(final)) return final;
  const parent = join(options.cacheDir, 'models');
  await mkdir(parent, { recursive: true });
  const temp = await mkdtemp(join(parent, `.builtin-tiny-v${BUILTIN_TINY_VERSION}.tmp-`));
  try {
    await genModel({
      preset: 'tiny',
      format: 'hf',
      out: temp,
      seed: BUILTIN_TINY_SEED,
      dtype: 'f32',
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
    await rename(temp, final);
  } catch (error) {
    await rm(temp, { recursive: true, force: true });
    // Another process finished first: its copy is complete (rename is atomic), use it.
    if (await exists(final)) return final;
    throw error;
  }
  return final;
}
