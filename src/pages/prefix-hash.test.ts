import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, type Tag } from '../core/index.js';
import { pagesFor } from './arithmetic.js';
import type { Owner } from './page-entry.js';
import { PagePool } from './pool.js';
import { PrefixCache } from './prefix-cache.js';
import { PrefixHasher } from './prefix-hash.js';

const PAGE_SIZE = 4;
const owner = (rid: string, tenant: string): Owner => ({ rid: asRequestId(rid), tenant: asTenantId(tenant) });
const tokensFrom = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
const hasher = new PrefixHasher('cluster-secret-0123456789abcdef');
const tag = (tenant: string): string => hasher.tenantTag(tenant);
const blockHashes = (tenant: string, tokens: readonly number[], pageSize: number): string[] =>
  hasher.blockHashes(tag(tenant), tokens, pageSize);

/** One request computed and finished: every page written, then offered to the cache. */
function serve(pool: PagePool, cache: PrefixCache, who: Owner, tokens: readonly number[]): void {
  const hit = cache.match(who, tokens.slice(0, -1));
  const result = cache.allocate(pagesFor(tokens.length, PAGE_SIZE) - hit.tags.length, who);
  if (result.kind !== 'allocated') throw new Error('out of pages');
  const table = [...hit.tags, ...result.tags];
  for (let i = hit.tags.length; i < table.length; i++) {
    pool.checkWrite(who, [table[i] as Tag]);
    pool.stamp(table[i] as Tag, Math.max(0, Math.min(PAGE_SIZE, tokens.length - i * PAGE_SIZE)));
  }
  cache.insert(who, tokens, table);
}

describe('prefix block hashes: what a prefill reports is what the router computes', () => {
  it("the cache's report holds exactly the chained hashes of its cached pages, per tenant", () => {
    const pool = PagePool.create({ numPages: 16, pageSize: PAGE_SIZE, numLayers: 1, numKvHeads: 1, headDim: 1 });
    const cache = new PrefixCache({ pool });
    serve(pool, cache, owner('a', 't1'), tokensFrom(100, 10)); // 2 full pages cached
    serve(pool, cache, owner('b', 't1'), [...tokensFrom(100, 8), ...tokensFrom(500, 5)]); // shares 2, adds 1
    serve(pool, cache, owner('c', 't2'), tokensFrom(100, 10)); // same tokens, other tenant
    const report = cache.blockHashReport(100, hasher);
    const t1 = new Set([
      ...blockHashes('t1', tokensFrom(100, 10), PAGE_SIZE),
      ...blockHashes('t1', [...tokensFrom(100, 8), ...tokensFrom(500, 5)], PAGE_SIZE),
    ]);
    expect(new Set(report.get(tag('t1')))).toEqual(t1);
    expect(t1.size).toBe(3);
    expect(new Set(report.get(tag('t2')))).toEqual(new Set(blockHashes('t2', tokensFrom(100, 10), PAGE_SIZE)));
    // the tenant is in every hash: the same tokens never hash alike across tenants
    expect(blockHashes('t1', tokensFrom(100, 8), PAGE_SIZE).some((h) => report.get(tag('t2'))?.includes(h))).toBe(
      false,
    );
    // Asked again (hashes remembered per page), the same report; another secret, other hashes.
    expect(cache.blockHashReport(100, hasher)).toEqual(report);
    const other = new PrefixHasher('another-secret-0123456789abcdef');
    expect([...cache.blockHashReport(100, other).values()].flat().some((h) => t1.has(h))).toBe(false);
    expect(cache.blockHashReport(2, hasher).get(tag('t1'))?.length ?? 0).toBeLessThanOrEqual(2);
    const { lookupTokens, hitTokens } = cache.lookupStats();
    expect(lookupTokens).toBe(9 + 12 + 9);
    expect(hitTokens).toBe(8); // b found a's two pages
  });
});
