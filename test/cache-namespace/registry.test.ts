// Every long-lived store in src/ is in the cache registry (src/core/cache-registry.ts), as a cache
// (with its key and its probe, isolation.test.ts) or as state (with why); an entry whose store is
// gone fails too, so the registry stays the list of what exists.
// Negative controls: the scan reports a dummy cache added to a source file (a Map field, a
// module-level LRU, a class named like a cache), and misses none of the registered caches' sites.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CACHES, NOT_CACHES } from '../../src/core/cache-registry.js';
import { PROBES } from './probes.js';
import { storesIn, storesOf } from './scan.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const registered = new Set([...CACHES.flatMap((c) => c.sites), ...NOT_CACHES.map((s) => s.site)]);

describe('the cache registry', () => {
  it('names every long-lived store in src/ (a new one must say whether it is a cache, and how it is keyed)', () => {
    const unregistered = storesOf(ROOT).filter((site) => !registered.has(site));
    expect(unregistered, 'add each to CACHES (with its probe) or NOT_CACHES in src/core/cache-registry.ts').toEqual([]);
  });

  it('names no store that is gone', () => {
    const found = new Set(storesOf(ROOT));
    expect([...registered].filter((site) => !found.has(site))).toEqual([]);
  });

  it('names each site once, and every cache has a probe and says how its key holds the namespace', () => {
    const all = [...CACHES.flatMap((c) => c.sites), ...NOT_CACHES.map((s) => s.site)];
    expect(all.length).toBe(new Set(all).size);
    for (const cache of CACHES) {
      expect(PROBES[cache.name], `a probe for ${cache.name}`).toBeDefined();
      expect(cache.key.length).toBeGreaterThan(20);
    }
  });
});

describe('the scan (negative controls)', () => {
  it('reports a dummy cache added without registering it: a Map field, a module-level LRU, a record named like a cache, a class named like a cache', () => {
    const dummy = [
      'const schemaMemo = new SchemaLru(64);',
      'export const templateCache: Record<string, string> = {};',
      'const memoryLimits = {}; // named memory, not memo: not a store',
      'export class TemplateCache {',
      '  readonly #rendered = new Map<string, string>();',
      '  constructor() {',
      '    this.#seen = new Set<string>();',
      '  }',
      '  render(text: string): string {',
      '    const local = new Map<string, number>(); // per call: not a store',
      '    return text;',
      '  }',
      '}',
    ].join('\n');
    const sites = storesIn('src/api/dummy.ts', dummy);
    expect(sites.sort()).toEqual(
      [
        'src/api/dummy.ts:schemaMemo',
        'src/api/dummy.ts:templateCache',
        'src/api/dummy.ts:class TemplateCache',
        'src/api/dummy.ts:#rendered',
        'src/api/dummy.ts:#seen',
      ].sort(),
    );
    expect(sites.filter((site) => !registered.has(site))).toHaveLength(5);
  });
});
