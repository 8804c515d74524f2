// Where Tessera's own package lives on disk (the directory holding its package.json), found by
// walking up from this file, so it works from src/ under vitest and from dist/ when installed.
// It must never look at the working directory: callers may run from anywhere.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvariantError } from '../core/index.js';

export const PACKAGE_NAME = 'tessera';

export function packageRoot(from: string = fileURLToPath(import.meta.url)): string {
  let dir = dirname(from);
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      const name = (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name;
      if (name === PACKAGE_NAME) return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new InvariantError(`no package.json named "${PACKAGE_NAME}" above ${from}`);
    dir = parent;
  }
}
