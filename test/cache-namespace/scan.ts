// The scan behind registry.test.ts: the long-lived stores a source file declares, as registry
// sites (`path:name`, `path:#name`, `path:class Name`):
//   - a class field (two-space indent) or a module-level const/let/var initialised with `new X`,
//     or a constructor's `this.x = new X`, where X is Map, WeakMap, Set, WeakSet, or a class
//     whose name ends in Cache(s), Lru/LRU or Memo(s)
//   - the same kinds of declaration named like a cache (cache, memo but not memory, lru) holding
//     an object or array literal or Object.create(...) (a record used as a map)
//   - a class whose name contains Cache, Memo (not Memory) or Lru/LRU
// What it cannot see (a store inside a closure, an object literal or array used as a map) is why
// the registry also names caches with no site (their probes still run).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const HOLDER = /^(Map|WeakMap|Set|WeakSet|[A-Za-z_$][\w$]*(Cache|Caches|Lru|LRU|Memo|Memos))$/;
const CACHE_CLASS = /(Cache|Memo(?!ry)|Lru|LRU)/;
const CACHE_NAME = /(cache|memo(?!ry)|lru)/i;
const LITERAL = /^(\{|\[|Object\.create\()/;
const DECLARATIONS = [
  /^ {2}(?:static\s+)?(?:private\s+|protected\s+|public\s+)?(?:readonly\s+)?(#?[A-Za-z_$][\w$]*)\s*(?::[^=;]+)?=\s*(.*)$/,
  /^(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=;]+)?=\s*(.*)$/,
  /^\s+this\.(#?[A-Za-z_$][\w$]*)\s*=\s*(.*)$/,
];

/** Whether a declaration of `name` initialised with `init` is a store. */
function isStore(name: string, init: string): boolean {
  const made = /^new\s+([A-Za-z_$][\w$]*)/.exec(init);
  if (made !== null) return HOLDER.test(made[1] as string);
  return CACHE_NAME.test(name) && LITERAL.test(init);
}

/** The store sites one file declares; `path` as the registry names files (from the repository root). */
export function storesIn(path: string, text: string): string[] {
  const sites = new Set<string>();
  for (const line of text.split('\n')) {
    for (const pattern of DECLARATIONS) {
      const m = pattern.exec(line);
      if (m !== null && isStore(m[1] as string, m[2] as string)) sites.add(`${path}:${m[1] as string}`);
    }
    const c = /^(?:export\s+)?(?:abstract\s+)?class\s+([A-Za-z_$][\w$]*)/.exec(line.trim());
    if (c !== null && CACHE_CLASS.test(c[1] as string)) sites.add(`${path}:class ${c[1] as string}`);
  }
  return [...sites];
}

/** Every production source file under `dir` (no tests, no test support under testing/). */
export function sourceFiles(root: string, dir = 'src'): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return name === 'testing' ? [] : sourceFiles(root, path);
    return name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The store sites of every source file of the repository at `root`. */
export function storesOf(root: string): string[] {
  return sourceFiles(root).flatMap((path) =>
    storesIn(relative(root, join(root, path)).split('\\').join('/'), readFileSync(join(root, path), 'utf8')),
  );
}
