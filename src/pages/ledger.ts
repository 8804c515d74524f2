// PageLedger: the control-plane record of every page of one worker's pool.
// Owns: each page's state, owner (request and tenant), epoch, cached readers; the free list.
// Must never: touch page data or stamps (PagePool does), read clocks or randomness, or let a
// verb act on a page its caller does not hold in the tag's epoch (that throws, unchanged).
//
// The life of a page:
//
//              allocate(n, owner): a new epoch per page
//   +------+  ------------------------------------------>  +-----------+
//   | free |                                               | allocated |
//   +------+  <------------------------------------------  +-----------+
//    ^    ^        free / relinquish(tags, owner)             |       |
//    |    |                              cache(tags, owner)   |       |   quarantine(tags, owner)
//    |    |                                   +---------------+       +-------------+
//    |    |                                   v                                     v
//    |    |   uncache(tags): no readers  +--------+                          +-------------+
//    |    +----------------------------  | cached |                          | quarantined |
//    |                                   +--------+                          +-------------+
//    |                            ref / unref / relinquish:                         |
//    |                            its tenant's readers; read-only                   |
//    +------------------------------------------------------------------------------+
//             release(tags, owner): after the peer's AbortAck or connection close
//
// Epochs: one counter per ledger, bumped by every allocation, so an epoch names one
// allocation event of one page (no two pages ever share a non-zero epoch) and a tag
// (page, epoch) can never be valid twice. Epoch 0 means "never allocated". Epochs are plain
// numbers, exact to 2^53 (a 32-bit epoch would wrap within hours on a busy server).
//
// Free-list order is FIFO (see free-queue.ts): a fresh pool hands out 0, 1, 2, ...; a freed
// page goes to the back, behind every page that was already free.
import {
  assert,
  asEpoch,
  InvariantError,
  type PageCounts,
  type PageId,
  type RequestId,
  type Tag,
} from '../core/index.js';
import { FreeQueue } from './free-queue.js';
import { checkLedgerIntegrity } from './ledger-integrity.js';
import {
  describeEntry,
  describeOwner,
  zeroCounts,
  type AllocateResult,
  type HeldPages,
  type Owner,
  type PageEntry,
} from './page-entry.js';

/** Why `verb` may not touch this page, or undefined when it may (the epoch is checked separately). */
type Refusal = (entry: PageEntry) => string | undefined;

export class PageLedger {
  readonly numPages: number;
  readonly #entries: PageEntry[] = [];
  readonly #free: FreeQueue;
  readonly #counts: PageCounts = zeroCounts();
  #lastEpoch = 0;

  constructor(numPages: number) {
    assert(Number.isSafeInteger(numPages) && numPages > 0, () => `a pool needs at least one page, got ${numPages}`);
    this.numPages = numPages;
    for (let page = 0; page < numPages; page++)
      this.#entries.push({ state: 'free', page: page as PageId, epoch: asEpoch(0) });
    this.#free = new FreeQueue(numPages);
    this.#counts.free = numPages;
  }

  get numFree(): number {
    return this.#free.length;
  }

  /** The epoch handed out by the latest allocation (0 before any). */
  get lastEpoch(): number {
    return this.#lastEpoch;
  }

  canAllocate(numPages: number): boolean {
    assertCount(numPages);
    return numPages <= this.#free.length;
  }

  /** Hands out numPages pages from the front of the free list, each with a new epoch. */
  allocate(numPages: number, owner: Owner): AllocateResult {
    assertCount(numPages);
    if (numPages > this.#free.length)
      return { kind: 'out-of-pages', numRequested: numPages, numFree: this.#free.length };
    assert(this.#lastEpoch + numPages <= Number.MAX_SAFE_INTEGER, 'epoch counter exhausted');
    const tags: Tag[] = [];
    for (let i = 0; i < numPages; i++) {
      const page = this.#free.shift();
      const epoch = asEpoch(++this.#lastEpoch);
      this.#set({ state: 'allocated', page, epoch, rid: owner.rid, tenant: owner.tenant });
      tags.push({ page, epoch });
    }
    return { kind: 'allocated', tags };
  }

  /** allocated (to owner) -> free. */
  free(tags: readonly Tag[], owner: Owner): void {
    this.#transition('free', tags, holds(owner, 'allocated'), (e) => ({ state: 'free', page: e.page, epoch: e.epoch }));
  }

  /** allocated (to owner) -> quarantined: a peer may still write these pages. */
  quarantine(tags: readonly Tag[], owner: Owner): void {
    this.#transition('quarantine', tags, holds(owner, 'allocated'), (e) => ({
      state: 'quarantined',
      page: e.page,
      epoch: e.epoch,
      rid: owner.rid,
      tenant: owner.tenant,
    }));
  }

  /** quarantined (for owner) -> free, once the peer acknowledged the abort or its connection closed. */
  release(tags: readonly Tag[], owner: Owner): void {
    this.#transition('release', tags, holds(owner, 'quarantined'), (e) => ({
      state: 'free',
      page: e.page,
      epoch: e.epoch,
    }));
  }

  /** allocated (to owner) -> cached for owner's tenant, with no readers. The epoch is kept: the data is that epoch's. */
  cache(tags: readonly Tag[], owner: Owner): void {
    this.#transition('cache', tags, holds(owner, 'allocated'), (e) => ({
      state: 'cached',
      page: e.page,
      epoch: e.epoch,
      tenant: owner.tenant,
      readers: [],
    }));
  }

  /** Adds `reader` to the readers of cached pages of its own tenant. */
  ref(tags: readonly Tag[], reader: Owner): void {
    this.#transition(
      'ref',
      tags,
      (e) => {
        if (e.state !== 'cached') return 'is not cached';
        if (e.tenant !== reader.tenant) return `is not cached for tenant ${reader.tenant}`;
        if (e.readers.includes(reader.rid)) return `is already referenced by ${reader.rid}`;
        return undefined;
      },
      (e) => withReaders(e, [...readersOf(e), reader.rid]),
    );
  }

  /** Drops `reader`'s reference to cached pages. */
  unref(tags: readonly Tag[], reader: Owner): void {
    this.#transition('unref', tags, isReader(reader), (e) =>
      withReaders(
        e,
        readersOf(e).filter((rid) => rid !== reader.rid),
      ),
    );
  }

  /** cached, with no readers -> free (prefix-cache eviction). */
  uncache(tags: readonly Tag[]): void {
    this.#transition(
      'uncache',
      tags,
      (e) =>
        e.state !== 'cached'
          ? 'is not cached'
          : e.readers.length > 0
            ? `still has readers ${e.readers.join(', ')}`
            : undefined,
      (e) => ({ state: 'free', page: e.page, epoch: e.epoch }),
    );
  }

  /** The owner is done with a mixed page table: its allocated pages become free, its cache references are dropped. */
  relinquish(tags: readonly Tag[], owner: Owner): void {
    const allocated = holds(owner, 'allocated');
    const reader = isReader(owner);
    this.#transition(
      'relinquish',
      tags,
      (e) => (e.state === 'cached' ? reader(e) : allocated(e)),
      (e) =>
        e.state === 'cached'
          ? withReaders(
              e,
              readersOf(e).filter((rid) => rid !== owner.rid),
            )
          : { state: 'free', page: e.page, epoch: e.epoch },
    );
  }

  entry(page: PageId): PageEntry {
    return this.#entryOf(page, 'entry');
  }

  counts(): PageCounts {
    return { ...this.#counts };
  }

  /** The pages a request holds, by a scan of the whole ledger (for aborts, crash clean-up and tests). */
  pagesOf(rid: RequestId): HeldPages {
    const allocated: Tag[] = [];
    const quarantined: Tag[] = [];
    const referenced: Tag[] = [];
    for (const e of this.#entries) {
      const tag = { page: e.page, epoch: e.epoch };
      if (e.state === 'allocated' && e.rid === rid) allocated.push(tag);
      else if (e.state === 'quarantined' && e.rid === rid) quarantined.push(tag);
      else if (e.state === 'cached' && e.readers.includes(rid)) referenced.push(tag);
    }
    return { allocated, quarantined, referenced };
  }

  /** The free list in hand-out order. */
  freeList(): PageId[] {
    return this.#free.toArray();
  }

  /** See ledger-integrity.ts. O(numPages): cheap enough after every step in tests. */
  checkIntegrity(): void {
    checkLedgerIntegrity({
      numPages: this.numPages,
      lastEpoch: this.#lastEpoch,
      entries: this.#entries,
      freeList: this.#free.toArray(),
      counts: this.#counts,
    });
  }

  #entryOf(page: PageId, verb: string): PageEntry {
    const e = this.#entries[page];
    if (!Number.isInteger(page) || e === undefined)
      throw new InvariantError(`${verb}: page ${page} is outside the pool (0..${this.numPages - 1})`);
    return e;
  }

  /** Validates every tag first, then applies: a refused call leaves the ledger unchanged. */
  #transition(verb: string, tags: readonly Tag[], refusal: Refusal, next: (entry: PageEntry) => PageEntry): void {
    const seen = new Set<number>();
    for (const tag of tags) {
      const e = this.#entryOf(tag.page, verb);
      if (seen.has(tag.page)) throw new InvariantError(`${verb}: page ${tag.page} appears twice in one call`);
      seen.add(tag.page);
      const why =
        refusal(e) ??
        (e.epoch !== tag.epoch ? `has epoch ${e.epoch}, not the tag's ${tag.epoch} (stale tag)` : undefined);
      if (why !== undefined) throw new InvariantError(`${verb}: page ${tag.page} ${why}; it is ${describeEntry(e)}`);
    }
    for (const tag of tags) this.#set(next(this.#entries[tag.page] as PageEntry));
  }

  #set(entry: PageEntry): void {
    const old = this.#entries[entry.page] as PageEntry;
    this.#counts[old.state]--;
    this.#counts[entry.state]++;
    this.#entries[entry.page] = entry;
    if (entry.state === 'free' && old.state !== 'free') this.#free.push(entry.page);
  }
}

function assertCount(numPages: number): void {
  assert(
    Number.isSafeInteger(numPages) && numPages >= 0,
    () => `page count must be a non-negative integer, got ${numPages}`,
  );
}

function holds(owner: Owner, state: 'allocated' | 'quarantined'): Refusal {
  return (e) =>
    e.state === state && e.rid === owner.rid && e.tenant === owner.tenant
      ? undefined
      : `is not ${state} to ${describeOwner(owner)}`;
}

function isReader(reader: Owner): Refusal {
  return (e) =>
    e.state === 'cached' && e.tenant === reader.tenant && e.readers.includes(reader.rid)
      ? undefined
      : `is not a cached page referenced by ${describeOwner(reader)}`;
}

function readersOf(e: PageEntry): readonly RequestId[] {
  assert(e.state === 'cached', () => `page ${e.page} is not cached`);
  return e.readers;
}

function withReaders(e: PageEntry, readers: readonly RequestId[]): PageEntry {
  assert(e.state === 'cached', () => `page ${e.page} is not cached`);
  return { ...e, readers };
}
