import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, FaultSet, InvariantError, NO_FAULTS, type Tag } from '../core/index.js';
import { pagesFor } from './arithmetic.js';
import type { Owner } from './page-entry.js';
import { PagePool } from './pool.js';
import { PrefixCache, type PrefixMatch } from './prefix-cache.js';

const PAGE_SIZE = 4;
const SHARE_ACROSS_TENANTS = new FaultSet(['share-prefix-across-tenants']);
const owner = (rid: string, tenant: string): Owner => ({ rid: asRequestId(rid), tenant: asTenantId(tenant) });
const A = owner('a', 't1');
const B = owner('b', 't1');
const C = owner('c', 't2');
const D = owner('d', 't1');
const E = owner('e', 't1');

/** Token ids start, start + 1, ..., numTokens of them. */
const tokensFrom = (start: number, numTokens: number): number[] =>
  Array.from({ length: numTokens }, (_, i) => start + i);
const pagesOf = (tags: readonly Tag[]): number[] => tags.map((t) => t.page);

function setup(faults = NO_FAULTS): { pool: PagePool; cache: PrefixCache } {
  const pool = PagePool.create({ numPages: 11, pageSize: PAGE_SIZE, numLayers: 1, numKvHeads: 1, headDim: 1 }, faults);
  return { pool, cache: new PrefixCache({ pool, faults }) };
}

/**
 * What the scheduler does for one request until it finishes: reuse the cached prefix, allocate
 * pages for the rest, write (stamp) every token. Returns the page table.
 */
function compute(
  pool: PagePool,
  cache: PrefixCache,
  who: Owner,
  tokens: readonly number[],
  filled = tokens.length,
): Tag[] {
  const hit = cache.match(who, tokens.slice(0, -1));
  const result = cache.allocate(pagesFor(tokens.length, PAGE_SIZE) - hit.tags.length, who);
  if (result.kind !== 'allocated') throw new Error('out of pages');
  const table = [...hit.tags, ...result.tags];
  pool.checkRead(who, table, hit.numTokens);
  for (let i = hit.tags.length; i < table.length; i++) {
    pool.checkWrite(who, [table[i] as Tag]);
    pool.stamp(table[i] as Tag, Math.max(0, Math.min(PAGE_SIZE, filled - i * PAGE_SIZE)));
  }
  return table;
}

function serve(pool: PagePool, cache: PrefixCache, who: Owner, tokens: readonly number[]): Tag[] {
  const table = compute(pool, cache, who, tokens);
  cache.insert(who, tokens, table);
  cache.checkIntegrity();
  pool.checkIntegrity();
  return table;
}

describe('PrefixCache insert', () => {
  it('caches the full pages of a finished request and frees its partial tail', () => {
    const { pool, cache } = setup();
    const table = serve(pool, cache, A, tokensFrom(100, 10));
    expect(pagesOf(table)).toEqual([0, 1, 2]);
    expect(pool.ledger.counts()).toEqual({ free: 9, allocated: 0, cached: 2, quarantined: 0 });
    expect(pool.ledger.entry(table[0]!.page)).toEqual({
      state: 'cached',
      page: 0,
      epoch: 1,
      tenant: 't1',
      readers: [],
    });
    expect(pool.ledger.freeList()).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 2]);
  });

  it('extends a cached prefix with the pages a longer prompt added', () => {
    const { pool, cache } = setup();
    serve(pool, cache, A, tokensFrom(100, 8)); // pages 0, 1
    const table = serve(pool, cache, B, tokensFrom(100, 17)); // hits 0, 1; computes 2, 3, 4
    expect(pagesOf(table)).toEqual([0, 1, 2, 3, 4]);
    expect(cache.numPages).toBe(4);
    expect(pool.ledger.entry(table[0]!.page)).toMatchObject({ state: 'cached', readers: [] });
    expect(pool.ledger.counts()).toEqual({ free: 7, allocated: 0, cached: 4, quarantined: 0 });
  });

  it('frees the duplicate pages of a request that computed a prefix another request cached first', () => {
    const { pool, cache } = setup();
    const a = compute(pool, cache, A, tokensFrom(100, 8));
    const b = compute(pool, cache, B, tokensFrom(100, 8));
    expect(pagesOf(b)).toEqual([2, 3]);
    expect(cache.insert(A, tokensFrom(100, 8), a)).toBe(2);
    expect(cache.insert(B, tokensFrom(100, 8), b)).toBe(0);
    expect(pool.ledger.counts()).toEqual({ free: 9, allocated: 0, cached: 2, quarantined: 0 });
    expect(pool.ledger.freeList().slice(-2)).toEqual([2, 3]);
    cache.checkIntegrity();
  });

  it('stops caching at the first page not stamped full in its epoch, and frees the rest', () => {
    const { pool, cache } = setup();
    const table = compute(pool, cache, A, tokensFrom(100, 12), 7); // page 1 holds 3 of 4 slots
    expect(cache.insert(A, tokensFrom(100, 12), table)).toBe(1);
    expect(pool.ledger.counts()).toEqual({ free: 10, allocated: 0, cached: 1, quarantined: 0 });
    cache.checkIntegrity();
  });

  it('refuses pages the request does not hold, and changes nothing', () => {
    const { pool, cache } = setup();
    const a = compute(pool, cache, A, tokensFrom(100, 8));
    expect(() => cache.insert(B, tokensFrom(100, 8), a)).toThrow(/insert: page 0 \(epoch 1\) is not held by b/);
    expect(() => cache.insert(A, tokensFrom(100, 8), [a[0]!, a[0]!])).toThrow(/appears twice/);
    expect(pool.ledger.counts()).toEqual({ free: 9, allocated: 2, cached: 0, quarantined: 0 });
    cache.checkIntegrity();
  });
});

describe('PrefixCache is scoped by tenant', () => {
  const prompt = tokensFrom(100, 10);

  function sameTenantLooksUp(faults: FaultSet): PrefixMatch {
    const { pool, cache } = setup(faults);
    serve(pool, cache, A, prompt);
    const hit = cache.match(B, prompt.slice(0, -1));
    pool.checkRead(B, hit.tags, hit.numTokens);
    return hit;
  }

  function otherTenantLooksUp(faults: FaultSet): PrefixMatch {
    const { pool, cache } = setup(faults);
    serve(pool, cache, A, prompt);
    return cache.match(C, prompt.slice(0, -1));
  }

  it('a request of the same tenant hits the cached pages, takes a reference and may read them', () => {
    const hit = sameTenantLooksUp(NO_FAULTS);
    expect(hit.numTokens).toBe(8);
    expect(hit.tags).toEqual([
      { page: 0, epoch: 1 },
      { page: 1, epoch: 2 },
    ]);
  });

  it('a request of another tenant with the same prompt misses', () => {
    expect(otherTenantLooksUp(NO_FAULTS)).toEqual({ tags: [], numTokens: 0 });
  });

  it('with share-prefix-across-tenants the other-tenant test fails: the lookup crosses tenants, and the ledger refuses it (negative control)', () => {
    expect(() => otherTenantLooksUp(SHARE_ACROSS_TENANTS)).toThrow(InvariantError);
    expect(() => otherTenantLooksUp(SHARE_ACROSS_TENANTS)).toThrow(/ref: page 0 is not cached for tenant t2/);
    // The fault changes nothing for the same tenant.
    expect(sameTenantLooksUp(SHARE_ACROSS_TENANTS).numTokens).toBe(8);
  });
});

describe('PrefixCache eviction', () => {
  /** t1 caches pages 0, 1 (one path) and 3; t2 caches page 2; then D re-reads pages 0 and 1. */
  function busyCache(): { pool: PagePool; cache: PrefixCache; dTable: Tag[] } {
    const { pool, cache } = setup();
    serve(pool, cache, A, tokensFrom(100, 8)); // pages 0 -> 1
    serve(pool, cache, C, tokensFrom(200, 4)); // page 2 (t2)
    serve(pool, cache, B, tokensFrom(300, 4)); // page 3
    const dTable = compute(pool, cache, D, tokensFrom(100, 9)); // hits 0, 1; allocates 4
    return { pool, cache, dTable };
  }

  it('never evicts a page someone reads, nor its parent', () => {
    const { pool, cache } = busyCache();
    expect(cache.numEvictable()).toBe(2);
    expect(cache.evict(10)).toEqual([2, 3]);
    expect(pool.ledger.counts()).toEqual({ free: 8, allocated: 1, cached: 2, quarantined: 0 });
    cache.checkIntegrity();
  });

  it('evicts least recently used leaves first, then parents that became leaves', () => {
    const { pool, cache, dTable } = busyCache();
    cache.insert(D, tokensFrom(100, 9), dTable); // drops D's references, touching 0 and 1
    expect(cache.evict(1)).toEqual([2]);
    expect(cache.evict(2)).toEqual([3, 1]);
    expect(cache.evict(5)).toEqual([0]);
    expect(pool.ledger.counts()).toEqual({ free: 11, allocated: 0, cached: 0, quarantined: 0 });
    expect(pool.ledger.freeList()).toEqual([5, 6, 7, 8, 9, 10, 4, 2, 3, 1, 0]);
    cache.checkIntegrity();
  });

  it('evicts just enough pages when an allocation falls short, and none when eviction cannot help', () => {
    const { pool, cache, dTable } = busyCache();
    cache.insert(D, tokensFrom(100, 9), dTable);
    expect(pool.ledger.numFree).toBe(7);
    // 7 free + 4 cached: 9 pages need 2 evictions.
    expect(cache.allocate(12, E)).toEqual({ kind: 'out-of-pages', numRequested: 12, numFree: 7 });
    expect(cache.numPages).toBe(4);
    const result = cache.allocate(9, E);
    expect(result.kind === 'allocated' && pagesOf(result.tags)).toEqual([5, 6, 7, 8, 9, 10, 4, 2, 3]);
    expect(cache.numPages).toBe(2);
    cache.checkIntegrity();
  });
});

describe('PrefixCache integrity', () => {
  it('notices a cached page that left the cache behind its back', () => {
    const { pool, cache } = setup();
    const table = serve(pool, cache, A, tokensFrom(100, 8));
    pool.ledger.uncache([table[1]!]);
    expect(() => cache.checkIntegrity()).toThrow(/prefix cache page 1 \(epoch 2\) is free/);
  });

  it('notices a reader of a page that does not read its parent', () => {
    const { pool, cache } = setup();
    const table = serve(pool, cache, A, tokensFrom(100, 8));
    pool.ledger.ref([table[1]!], B);
    expect(() => cache.checkIntegrity()).toThrow(/has a reader that does not read its parent page 0/);
  });
});
