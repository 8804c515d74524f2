// Finds build/kernels.wasm from wherever this code runs: src/ under vitest or dist/ after
// `npm run build`. Looks up the package root (the nearest package.json named "tessera")
// instead of assuming a fixed depth. Reads nothing but package.json files on the way up.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../../core/index.js';

export function findPackageRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'tessera')
      return dir;
    if (dirname(dir) === dir) throw new ConfigError(`cannot find Tessera's package.json above ${from}`);
  }
}

export function findKernelsWasm(): string {
  const path = join(findPackageRoot(), 'build', 'kernels.wasm');
  if (!existsSync(path))
    throw new ConfigError(`${path} is missing: run \`npm run build\` to compile the WebAssembly kernels`);
  return path;
}
