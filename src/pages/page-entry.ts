// The vocabulary of the ledger: page states, one entry per page, owners, allocation results.
// Owns: types and how an entry is described in messages. Must never hold mutable state.
import {
  assertNever,
  type Epoch,
  type PageCounts,
  type PageId,
  type RequestId,
  type Tag,
  type TenantId,
} from '../core/index.js';

/** Who holds pages: one request of one tenant. Readers and writers of pages are owners too. */
export interface Owner {
  readonly rid: RequestId;
  readonly tenant: TenantId;
}

/**
 * One page's ledger record. `epoch` is the allocation event that last handed the page out
 * (0: never allocated); a free page keeps its last epoch, so a stale tag still names it.
 */
export type PageEntry =
  | { readonly state: 'free'; readonly page: PageId; readonly epoch: Epoch }
  /** Owned by one request, which may write it. */
  | {
      readonly state: 'allocated';
      readonly page: PageId;
      readonly epoch: Epoch;
      readonly rid: RequestId;
      readonly tenant: TenantId;
    }
  /**
   * Held by the prefix cache for `tenant`; read-only. `readers` are the requests (all of
   * `tenant`) holding a reference; the reference count is readers.length. Only an
   * unreferenced cached page may be evicted.
   */
  | {
      readonly state: 'cached';
      readonly page: PageId;
      readonly epoch: Epoch;
      readonly tenant: TenantId;
      readonly readers: readonly RequestId[];
    }
  /** Owned by a request whose peer may still write into it; freed only by release(). */
  | {
      readonly state: 'quarantined';
      readonly page: PageId;
      readonly epoch: Epoch;
      readonly rid: RequestId;
      readonly tenant: TenantId;
    };

/** An expected shortage is a value; misuse (a negative count, ...) throws. */
export type AllocateResult =
  | { readonly kind: 'allocated'; readonly tags: readonly Tag[] }
  | { readonly kind: 'out-of-pages'; readonly numRequested: number; readonly numFree: number };

/** A request's pages by state, as the ledger sees them. */
export interface HeldPages {
  readonly allocated: readonly Tag[];
  readonly quarantined: readonly Tag[];
  /** Cached pages the request holds a reference to. */
  readonly referenced: readonly Tag[];
}

export function zeroCounts(): PageCounts {
  return { free: 0, allocated: 0, cached: 0, quarantined: 0 };
}

/** "allocated to r1 (tenant t1) in epoch 7": for error messages. */
export function describeEntry(entry: PageEntry): string {
  switch (entry.state) {
    case 'free':
      return entry.epoch === 0 ? 'free (never allocated)' : `free (last epoch ${entry.epoch})`;
    case 'allocated':
      return `allocated to ${entry.rid} (tenant ${entry.tenant}) in epoch ${entry.epoch}`;
    case 'cached':
      return `cached for tenant ${entry.tenant} in epoch ${entry.epoch} with ${entry.readers.length} reader(s)`;
    case 'quarantined':
      return `quarantined for ${entry.rid} (tenant ${entry.tenant}) in epoch ${entry.epoch}`;
    default:
      return assertNever(entry, 'page entry');
  }
}

export function describeOwner(owner: Owner): string {
  return `${owner.rid} (tenant ${owner.tenant})`;
}

export function sameTag(a: Tag, b: Tag): boolean {
  return a.page === b.page && a.epoch === b.epoch;
}
