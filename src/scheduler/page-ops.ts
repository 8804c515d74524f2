// PageOps: the scheduler's only door to the ledger and the prefix cache.
// Owns: how a request gets pages (cache hit first, then allocation that may evict unreferenced
// cached pages) and how it gives them back (into the cache when full and stamped, else freed;
// quarantined when a peer may still write them).
// Must never: keep a page for a request that has let it go, cache a page that is not full and
// stamped in its epoch (PrefixCache.insert refuses those), or write page data or stamps.
import type { Tag } from '../core/index.js';
import type { Owner, PagePool, PrefixCache, PrefixMatch } from '../pages/index.js';

const NO_MATCH: PrefixMatch = { tags: [], numTokens: 0 };

export class PageOps {
  readonly #pool: PagePool;
  readonly #cache: PrefixCache | undefined;

  constructor(pool: PagePool, cache: PrefixCache | undefined) {
    this.#pool = pool;
    this.#cache = cache;
  }

  get numPages(): number {
    return this.#pool.ledger.numPages;
  }

  /**
   * Pages an allocation could get now: free ones, plus unreferenced cached ones when the free
   * ones are fewer than `wanted` (counting those walks the cache, so only when needed).
   */
  available(wanted: number): number {
    const numFree = this.#pool.ledger.numFree;
    if (numFree >= wanted || this.#cache === undefined) return numFree;
    return numFree + this.#cache.numEvictable();
  }

  /** numPages fresh pages for owner, evicting cached pages if that makes it fit; undefined when it cannot. */
  allocate(numPages: number, owner: Owner): readonly Tag[] | undefined {
    const result =
      this.#cache === undefined ? this.#pool.ledger.allocate(numPages, owner) : this.#cache.allocate(numPages, owner);
    return result.kind === 'allocated' ? result.tags : undefined;
  }

  /** The tenant's cached pages for the longest full-page prefix of `tokens`, now referenced by owner. */
  match(owner: Owner, tokens: readonly number[]): PrefixMatch {
    return this.#cache === undefined ? NO_MATCH : this.#cache.match(owner, tokens);
  }

  /**
   * The request is done with its pages, which hold the K/V of `computed` (tokens from position 0):
   * full stamped pages go into its tenant's prefix cache, the rest are freed, references dropped.
   */
  retire(owner: Owner, computed: readonly number[], tags: readonly Tag[]): void {
    if (this.#cache === undefined) this.#pool.ledger.relinquish(tags, owner);
    else this.#cache.insert(owner, computed, tags);
  }

  /** Frees the request's pages and drops its references, caching nothing (a failed or aborted request). */
  letGo(owner: Owner, tags: readonly Tag[]): void {
    this.#pool.ledger.relinquish(tags, owner);
  }

  /**
   * A peer may still write the request's pages: its own pages are quarantined, its references to
   * cached pages (never written by a peer) dropped. Returns the quarantined tags.
   */
  quarantine(owner: Owner, tags: readonly Tag[]): Tag[] {
    const own: Tag[] = [];
    const referenced: Tag[] = [];
    for (const tag of tags) (this.#pool.ledger.entry(tag.page).state === 'cached' ? referenced : own).push(tag);
    this.#pool.ledger.unref(referenced, owner);
    this.#pool.ledger.quarantine(own, owner);
    return own;
  }

  /** Quarantined pages -> free, after the peer's AbortAck or the close of its connection. */
  release(owner: Owner, tags: readonly Tag[]): void {
    this.#pool.ledger.release(tags, owner);
  }

  /** True when tag's page carries a stamp of tag's epoch covering at least numSlots slots. */
  isWritten(tag: Tag, numSlots: number): boolean {
    return this.#pool.isWritten(tag, numSlots);
  }
}
