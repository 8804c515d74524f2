import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, ModelLoadError } from '../core/index.js';
import { builtinTinyDir, resolveBuiltinModel } from './builtin.js';
import type { GenProgress } from '../gen/index.js';
import { loadModel } from './load.js';
import { packageRoot } from './package-root.js';
import { PRESET_CONFIGS } from '../gen/index.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-builtin-'));
});
afterAll(async () => rm(root, { recursive: true, force: true }));

describe('builtin:tiny', () => {
  it('is generated on first use, with progress, then reused as is', async () => {
    const cacheDir = join(root, 'cache');
    const progress: GenProgress[] = [];
    const path = await resolveBuiltinModel('builtin:tiny', { cacheDir, onProgress: (p) => progress.push(p) });
    expect(path).toBe(builtinTinyDir(cacheDir));
    expect(progress.at(-1)!.doneBytes).toBe(progress.at(-1)!.totalBytes);
    const written = (await stat(join(path, 'model.safetensors'))).mtimeMs;

    const again: GenProgress[] = [];
    expect(await resolveBuiltinModel('builtin:tiny', { cacheDir, onProgress: (p) => again.push(p) })).toBe(path);
    expect(again).toEqual([]);
    expect((await stat(join(path, 'model.safetensors'))).mtimeMs).toBe(written);
    const model = await loadModel('builtin:tiny', { cacheDir });
    expect(model.config).toEqual(PRESET_CONFIGS.tiny);
    expect(model.source).toMatchObject({ spec: 'builtin:tiny', path, format: 'hf' });
  });

  it('ends complete, once, when two loads start at the same time, leaving no temporary files', async () => {
    const cacheDir = join(root, 'race');
    const [a, b] = await Promise.all([
      loadModel('builtin:tiny', { cacheDir }),
      loadModel('builtin:tiny', { cacheDir }),
    ]);
    expect(a.source.path).toBe(b.source.path);
    expect(await readdir(join(cacheDir, 'models'))).toEqual(['builtin-tiny-v1']);
    expect(a.tensors.size).toBe(b.tensors.size);
  });

  it('needs a cache directory', async () => {
    await expect(resolveBuiltinModel('builtin:tiny', {})).rejects.toThrow(ConfigError);
  });
});

describe('other built-in names', () => {
  it('builtin:austen is models/austen/ in the package, or a clear error when it is missing', async () => {
    const fake = join(root, 'package');
    await expect(resolveBuiltinModel('builtin:austen', { packageRoot: fake })).rejects.toThrow(
      new ModelLoadError(
        join(fake, 'models', 'austen'),
        'builtin:austen is not installed: this package has no models/austen/ model (config.json missing)',
      ),
    );
  });

  it('an unknown name lists the known ones', async () => {
    await expect(resolveBuiltinModel('builtin:huge', {})).rejects.toThrow(
      'builtin:huge: unknown built-in model (known: builtin:tiny, builtin:austen)',
    );
  });
});

describe('packageRoot', () => {
  it("finds the directory holding Tessera's package.json, from src/ as from dist/", () => {
    const expected = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
    expect(packageRoot()).toBe(expected);
    expect(JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')).name).toBe('tessera');
    expect(packageRoot(join(expected, 'dist', 'model', 'package-root.js'))).toBe(expected);
    expect(existsSync(join(packageRoot(), 'src', 'model', 'builtin.ts'))).toBe(true);
  });
});
