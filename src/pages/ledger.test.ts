import { describe, expect, it } from 'vitest';
import { asEpoch, asPageId, asRequestId, asTenantId, InvariantError, type Tag } from '../core/index.js';
import { PageLedger } from './ledger.js';
import { checkLedgerIntegrity, type LedgerSnapshot } from './ledger-integrity.js';
import { PAGE_STATES } from '../core/index.js';
import type { AllocateResult, Owner } from './page-entry.js';

const A: Owner = { rid: asRequestId('a'), tenant: asTenantId('t1') };
const B: Owner = { rid: asRequestId('b'), tenant: asTenantId('t1') };
const C: Owner = { rid: asRequestId('c'), tenant: asTenantId('t2') };

function tagsOf(result: AllocateResult): readonly Tag[] {
  if (result.kind !== 'allocated') throw new Error(`expected pages, got ${JSON.stringify(result)}`);
  return result.tags;
}
const pagesOf = (tags: readonly Tag[]): number[] => tags.map((t) => t.page);
const epochsOf = (tags: readonly Tag[]): number[] => tags.map((t) => t.epoch);

describe('PageLedger allocation', () => {
  it('hands out a fresh 11-page pool in order 0, 1, 2, ... with epochs 1, 2, 3, ...', () => {
    const ledger = new PageLedger(11);
    const a = tagsOf(ledger.allocate(3, A));
    const b = tagsOf(ledger.allocate(4, B));
    expect(pagesOf(a)).toEqual([0, 1, 2]);
    expect(epochsOf(a)).toEqual([1, 2, 3]);
    expect(pagesOf(b)).toEqual([3, 4, 5, 6]);
    expect(epochsOf(b)).toEqual([4, 5, 6, 7]);
    expect(ledger.entry(asPageId(4))).toEqual({ state: 'allocated', page: 4, epoch: 5, rid: 'b', tenant: 't1' });
    expect(ledger.entry(asPageId(7))).toEqual({ state: 'free', page: 7, epoch: 0 });
    expect(ledger.lastEpoch).toBe(7);
    ledger.checkIntegrity();
  });

  it('reuses freed pages first-in first-out, behind the pages that were already free', () => {
    const ledger = new PageLedger(11);
    const a = tagsOf(ledger.allocate(4, A)); // 0..3
    tagsOf(ledger.allocate(5, B)); // 4..8
    ledger.free([a[2] as Tag, a[0] as Tag], A);
    expect(ledger.freeList()).toEqual([9, 10, 2, 0]);
    const c = tagsOf(ledger.allocate(4, C));
    expect(pagesOf(c)).toEqual([9, 10, 2, 0]);
    expect(epochsOf(c)).toEqual([10, 11, 12, 13]);
    // The free entry remembered its last epoch, the new allocation has a new one.
    expect(ledger.entry(asPageId(2))).toMatchObject({ state: 'allocated', epoch: 12, rid: 'c' });
    ledger.checkIntegrity();
  });

  it('returns an out-of-pages value for a shortage and changes nothing', () => {
    const ledger = new PageLedger(11);
    tagsOf(ledger.allocate(8, A));
    expect(ledger.canAllocate(3)).toBe(true);
    expect(ledger.canAllocate(4)).toBe(false);
    expect(ledger.allocate(4, B)).toEqual({ kind: 'out-of-pages', numRequested: 4, numFree: 3 });
    expect(ledger.counts()).toEqual({ free: 3, allocated: 8, cached: 0, quarantined: 0 });
    expect(ledger.lastEpoch).toBe(8);
    expect(pagesOf(tagsOf(ledger.allocate(0, B)))).toEqual([]);
  });

  it('throws on a count that is negative or not an integer', () => {
    const ledger = new PageLedger(11);
    expect(() => ledger.allocate(-1, A)).toThrow(InvariantError);
    expect(() => ledger.canAllocate(1.5)).toThrow(InvariantError);
    expect(() => new PageLedger(0)).toThrow(InvariantError);
  });

  it('counts pages in every state it lists', () => {
    const ledger = new PageLedger(11);
    const a = tagsOf(ledger.allocate(6, A));
    ledger.quarantine(a.slice(0, 2), A);
    ledger.cache(a.slice(2, 5), A);
    expect(ledger.counts()).toEqual({ free: 5, allocated: 1, cached: 3, quarantined: 2 });
    expect(Object.keys(ledger.counts()).sort()).toEqual([...PAGE_STATES].sort());
  });
});

describe('PageLedger refuses misuse and changes nothing', () => {
  it("refuses to free another request's page, even when the call also names the caller's own", () => {
    const ledger = new PageLedger(11);
    const a = tagsOf(ledger.allocate(2, A));
    const b = tagsOf(ledger.allocate(2, B));
    expect(() => ledger.free([a[0] as Tag, b[0] as Tag], A)).toThrow(
      /free: page 2 is not allocated to a \(tenant t1\); it is allocated to b/,
    );
    expect(ledger.entry(asPageId(0))).toMatchObject({ state: 'allocated', rid: 'a' });
    expect(ledger.entry(asPageId(2))).toMatchObject({ state: 'allocated', rid: 'b' });
    // Same rid, other tenant: still not the owner.
    expect(() => ledger.free(a, { rid: A.rid, tenant: C.tenant })).toThrow(InvariantError);
    ledger.checkIntegrity();
  });

  it('refuses a stale tag once the page was freed and handed out again, even to the same request', () => {
    const ledger = new PageLedger(1);
    const [old] = tagsOf(ledger.allocate(1, A));
    ledger.free([old as Tag], A);
    const [fresh] = tagsOf(ledger.allocate(1, A));
    expect(fresh).toEqual({ page: 0, epoch: 2 });
    expect(() => ledger.free([old as Tag], A)).toThrow(/page 0 has epoch 2, not the tag's 1 \(stale tag\)/);
    expect(ledger.entry(asPageId(0))).toMatchObject({ state: 'allocated', epoch: 2 });
  });

  it('refuses a double free, a page named twice in one call, and a page outside the pool', () => {
    const ledger = new PageLedger(11);
    const a = tagsOf(ledger.allocate(2, A));
    expect(() => ledger.free([a[0] as Tag, a[0] as Tag], A)).toThrow(/appears twice/);
    ledger.free([a[0] as Tag], A);
    expect(() => ledger.free([a[0] as Tag], A)).toThrow(/not allocated to a/);
    expect(() => ledger.free([{ page: asPageId(11), epoch: asEpoch(1) }], A)).toThrow(/outside the pool/);
    expect(() => ledger.entry(asPageId(-1))).toThrow(InvariantError);
    expect(ledger.counts()).toEqual({ free: 10, allocated: 1, cached: 0, quarantined: 0 });
    ledger.checkIntegrity();
  });
});

describe('PageLedger quarantine', () => {
  it('keeps quarantined pages out of the free list until their owner releases them', () => {
    const ledger = new PageLedger(11);
    const a = tagsOf(ledger.allocate(3, A));
    ledger.quarantine(a, A);
    expect(ledger.entry(asPageId(1))).toEqual({ state: 'quarantined', page: 1, epoch: 2, rid: 'a', tenant: 't1' });
    expect(() => ledger.free(a, A)).toThrow(/not allocated to a/);
    expect(() => ledger.release(a, B)).toThrow(/not quarantined to b/);
    expect(ledger.freeList()).toEqual([3, 4, 5, 6, 7, 8, 9, 10]);
    ledger.release(a, A);
    expect(ledger.freeList()).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2]);
    expect(() => ledger.release(a, A)).toThrow(InvariantError);
    ledger.checkIntegrity();
  });
});

describe('PageLedger cached pages', () => {
  it('moves pages into the cache with their epoch, shared read-only by readers of the same tenant', () => {
    const ledger = new PageLedger(11);
    const a = tagsOf(ledger.allocate(2, A));
    ledger.cache(a, A);
    expect(ledger.entry(asPageId(0))).toEqual({ state: 'cached', page: 0, epoch: 1, tenant: 't1', readers: [] });
    ledger.ref(a, A);
    ledger.ref(a, B);
    expect(ledger.entry(asPageId(1))).toMatchObject({ readers: ['a', 'b'] });
    expect(() => ledger.ref(a, C)).toThrow(/is not cached for tenant t2/);
    expect(() => ledger.ref(a, B)).toThrow(/already referenced by b/);
    expect(() => ledger.free(a, A)).toThrow(/not allocated to a/);
    expect(() => ledger.uncache(a)).toThrow(/still has readers a, b/);
    ledger.unref(a, A);
    expect(() => ledger.unref(a, A)).toThrow(/not a cached page referenced by a/);
    ledger.unref(a, B);
    ledger.uncache(a);
    expect(ledger.entry(asPageId(1))).toEqual({ state: 'free', page: 1, epoch: 2 });
    expect(ledger.freeList().slice(-2)).toEqual([0, 1]);
    ledger.checkIntegrity();
  });

  it('relinquishes a mixed page table: frees what the request allocated, drops its cache references', () => {
    const ledger = new PageLedger(11);
    const a = tagsOf(ledger.allocate(2, A));
    ledger.cache(a, A);
    ledger.ref(a, B);
    const b = tagsOf(ledger.allocate(2, B));
    expect(ledger.pagesOf(B.rid)).toEqual({ allocated: b, quarantined: [], referenced: a });
    expect(() => ledger.relinquish([...a, ...b], A)).toThrow(InvariantError);
    ledger.relinquish([...a, ...b], B);
    expect(ledger.pagesOf(B.rid)).toEqual({ allocated: [], quarantined: [], referenced: [] });
    expect(ledger.counts()).toEqual({ free: 9, allocated: 0, cached: 2, quarantined: 0 });
    ledger.checkIntegrity();
  });
});

describe('ledger integrity', () => {
  function snapshot(): LedgerSnapshot {
    const ledger = new PageLedger(4);
    const a = tagsOf(ledger.allocate(2, A));
    ledger.cache(a.slice(0, 1), A);
    ledger.ref(a.slice(0, 1), B);
    return {
      numPages: 4,
      lastEpoch: ledger.lastEpoch,
      entries: [0, 1, 2, 3].map((p) => ledger.entry(asPageId(p))),
      freeList: ledger.freeList(),
      counts: ledger.counts(),
    };
  }

  it('passes on a consistent snapshot', () => {
    expect(() => checkLedgerIntegrity(snapshot())).not.toThrow();
  });

  it.each([
    [
      'a page on the free list twice',
      (s: LedgerSnapshot) => ({ ...s, freeList: [...s.freeList, asPageId(2)] }),
      /on the free list twice/,
    ],
    [
      'a free page missing from the free list',
      (s: LedgerSnapshot) => ({ ...s, freeList: s.freeList.slice(1) }),
      /free list holds 1 pages, 2 are free/,
    ],
    [
      'an allocated page on the free list',
      (s: LedgerSnapshot) => ({ ...s, freeList: [...s.freeList, asPageId(1)] }),
      /on the free list but is allocated/,
    ],
    [
      'counts that disagree',
      (s: LedgerSnapshot) => ({ ...s, counts: { ...s.counts, free: 3 } }),
      /counts 3 free pages, found 2/,
    ],
    [
      'two pages with one epoch',
      (s: LedgerSnapshot) => ({
        ...s,
        entries: s.entries.map((e) => (e.page === 1 ? { ...e, epoch: asEpoch(1) } : e)),
      }),
      /shares epoch 1/,
    ],
    ['an epoch from the future', (s: LedgerSnapshot) => ({ ...s, lastEpoch: 1 }), /epoch 2 outside 0..1/],
    [
      'a reader listed twice',
      (s: LedgerSnapshot) => ({
        ...s,
        entries: s.entries.map((e) => (e.state === 'cached' ? { ...e, readers: [B.rid, B.rid] } : e)),
      }),
      /reader twice/,
    ],
  ])('throws on %s', (_what, corrupt, message) => {
    expect(() => checkLedgerIntegrity(corrupt(snapshot()))).toThrow(message);
  });
});
