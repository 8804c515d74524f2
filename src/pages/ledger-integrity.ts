// The ledger's invariants, as a pure check over a snapshot of its fields, so tests can hand it
// corrupted snapshots and see each rule fire (the ledger's own fields are private).
// Owns: the list of invariants. Must never repair anything: a broken invariant is a bug, it throws.
import { assert, type PageId } from '../core/index.js';
import { PAGE_STATES, type PageCounts } from '../core/index.js';
import { describeEntry, zeroCounts, type PageEntry } from './page-entry.js';

export interface LedgerSnapshot {
  readonly numPages: number;
  /** The epoch of the latest allocation. */
  readonly lastEpoch: number;
  readonly entries: readonly PageEntry[];
  /** The free list in hand-out order. */
  readonly freeList: readonly PageId[];
  /** The per-state counts the ledger maintains as it goes. */
  readonly counts: PageCounts;
}

/**
 * Every page in exactly one state, recorded at its own index; maintained counts equal the
 * recount and add up to numPages; the free list holds exactly the free pages, once each;
 * each non-zero epoch names one page (one allocation event); a live page has an epoch; no
 * cached page lists a reader twice. O(numPages); throws InvariantError.
 */
export function checkLedgerIntegrity(s: LedgerSnapshot): void {
  assert(s.entries.length === s.numPages, () => `ledger has ${s.entries.length} entries for ${s.numPages} pages`);
  const counts = zeroCounts();
  const epochs = new Set<number>();
  s.entries.forEach((e, page) => {
    assert(e.page === page, () => `ledger page ${page} records itself as page ${e.page}`);
    counts[e.state]++;
    assert(
      Number.isSafeInteger(e.epoch) && e.epoch >= 0 && e.epoch <= s.lastEpoch,
      () => `ledger page ${page} has epoch ${e.epoch} outside 0..${s.lastEpoch}`,
    );
    assert(e.state === 'free' || e.epoch > 0, () => `ledger page ${page} is ${e.state} with epoch 0`);
    if (e.epoch > 0) {
      assert(!epochs.has(e.epoch), () => `ledger page ${page} shares epoch ${e.epoch} with another page`);
      epochs.add(e.epoch);
    }
    if (e.state === 'cached')
      assert(
        new Set(e.readers).size === e.readers.length,
        () => `ledger page ${page} lists a reader twice: ${e.readers.join(', ')}`,
      );
  });
  for (const state of PAGE_STATES) {
    assert(
      counts[state] === s.counts[state],
      () => `ledger counts ${s.counts[state]} ${state} pages, found ${counts[state]}`,
    );
  }
  const total = PAGE_STATES.reduce((sum, state) => sum + counts[state], 0);
  assert(total === s.numPages, () => `ledger states add up to ${total} pages, the pool has ${s.numPages}`);
  const onFreeList = new Set<number>();
  for (const page of s.freeList) {
    assert(!onFreeList.has(page), () => `page ${page} is on the free list twice`);
    onFreeList.add(page);
    const e = s.entries[page];
    assert(
      e !== undefined && e.state === 'free',
      () => `page ${page} is on the free list but is ${e === undefined ? 'outside the pool' : describeEntry(e)}`,
    );
  }
  assert(onFreeList.size === counts.free, () => `free list holds ${onFreeList.size} pages, ${counts.free} are free`);
}
