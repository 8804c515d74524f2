// The spill tier's contract, seen from the pool: where the prefix cache sends the pages it
// evicts, and where match() looks for the pages after its last cached one.
// Owns: the SpillStore interface (implemented with files in src/worker/disk-tier.ts), the
// identity of a spilled page (its cache namespace and the hash of every token id on its path
// from the root), and PageSpill, which moves one page's bytes between the pool and a store.
// Must never: read or write a file or start a timer (the store does, behind put/get), file a page
// under an identity without the namespace (only the fault `spill-without-namespace` drops it,
// the negative control), or put bytes into a page that has not passed checkWrite.
//
//   evict:  cached page --gatherSlots (into the store's buffer)--> put(namespace, pathHash, ...)  (written later)
//   match:  get(namespace, pathHash, numBytes) --hit--> allocate, checkWrite, scatterSlots, stamp
//
// A page's KV depends on every token before it, so its path hash chains all of them:
//   h(root) = ROOT_PATH_HASH     h(page i) = sha256("tessera-kv-path-v1|" + h(i-1) + "|" + ids of page i)
import { createHash } from 'node:crypto';
import {
  cacheNamespace,
  NO_FAULTS,
  PageCheckError,
  type CacheNamespace,
  type FaultSet,
  type PageId,
  type Tag,
  type TenantId,
} from '../core/index.js';
import { kvDtypeOf } from './kv-layout.js';
import type { AllocateResult, Owner } from './page-entry.js';
import type { PagePool } from './pool.js';

/** A namespace, or '' under the fault `spill-without-namespace`. */
export type SpillNamespace = CacheNamespace | '';

export interface SpillEntry {
  readonly namespace: SpillNamespace;
  readonly pathHash: string;
  /** The page's KV, all layers (PagePool.gatherSlots order). */
  readonly bytes: Uint8Array;
}

/** Why a stored page was not handed back: each is a miss, never a read. */
export type SpillRefusal = 'namespace' | 'path' | 'checksum' | 'length' | 'header' | 'io';
export const SPILL_REFUSALS: readonly SpillRefusal[] = ['namespace', 'path', 'checksum', 'length', 'header', 'io'];

export type SpillLoad =
  | { readonly kind: 'hit'; readonly bytes: Uint8Array }
  | { readonly kind: 'absent' }
  | { readonly kind: 'refused'; readonly reason: SpillRefusal };

export interface SpillStats {
  /** Pages handed to put() and kept (not already stored). */
  readonly spilledPages: number;
  /** Pages get() handed back after every check. */
  readonly loadedPages: number;
  /** get() calls that found nothing. */
  readonly misses: number;
  readonly refused: Readonly<Record<SpillRefusal, number>>;
  /** Pages stored (written or waiting to be) and their bytes on disk. */
  readonly numPages: number;
  readonly bytesOnDisk: number;
  readonly pendingWrites: number;
}

export interface SpillStore {
  /** True when get() may find the page (no I/O): lets eviction skip a copy and match skip an allocation. */
  has(namespace: SpillNamespace, pathHash: string): boolean;
  /**
   * Keeps a page of numBytes: the store hands `fill` a buffer of its own to copy the page into
   * (so it can reuse buffers), and writes it later; never blocks the caller.
   */
  put(namespace: SpillNamespace, pathHash: string, numBytes: number, fill: (into: Uint8Array) => void): void;
  /**
   * The page's bytes after checking namespace, path hash, length and checksum; synchronous. The
   * bytes may live in a buffer the store reuses: copy them before the next call.
   */
  get(namespace: SpillNamespace, pathHash: string, numBytes: number): SpillLoad;
  stats(): SpillStats;
}

/** What a worker hands its prefix cache to spill into. */
export interface KvSpill {
  readonly store: SpillStore;
  /** The model's fingerprint: part of every page's namespace. */
  readonly model: string;
}

export const ROOT_PATH_HASH = '0'.repeat(64);

/** The path hash of a page, from its parent's and its own token ids (joined with ','). */
export function nextPathHash(parent: string, pageKey: string): string {
  return createHash('sha256').update(`tessera-kv-path-v1|${parent}|${pageKey}`).digest('hex');
}

/** Moves single pages between one pool and one store. */
export class PageSpill {
  readonly #pool: PagePool;
  readonly #store: SpillStore;
  readonly #model: string;
  readonly #dropNamespace: boolean;
  readonly #numBytes: number;

  constructor(pool: PagePool, spill: KvSpill, faults: FaultSet = NO_FAULTS) {
    this.#pool = pool;
    this.#store = spill.store;
    this.#model = spill.model;
    this.#dropNamespace = faults.has('spill-without-namespace');
    this.#numBytes = pool.slotRangeBytes(pool.pageSize);
  }

  namespaceOf(tenant: TenantId): SpillNamespace {
    if (this.#dropNamespace) return '';
    const kvLayout = {
      dtype: kvDtypeOf(this.#pool.kv),
      pageSize: this.#pool.pageSize,
      bytesPerToken: this.#pool.slotRangeBytes(1),
    };
    return cacheNamespace({ tenant, model: this.#model, kvLayout });
  }

  /** A cached page is about to be evicted: hand a copy of its bytes to the store (unless it has them). */
  spill(tenant: TenantId, pathHash: string, page: PageId): void {
    const namespace = this.namespaceOf(tenant);
    if (this.#store.has(namespace, pathHash)) return;
    this.#store.put(namespace, pathHash, this.#numBytes, (into) => {
      this.#pool.gatherSlots(page, 0, this.#pool.pageSize, into);
    });
  }

  /**
   * The stored page at pathHash for reader's tenant, in a fresh page allocated to reader and
   * stamped full; undefined on a miss, a refused load or no room (nothing allocated then).
   */
  load(reader: Owner, pathHash: string, allocate: (numPages: number, owner: Owner) => AllocateResult): Tag | undefined {
    const namespace = this.namespaceOf(reader.tenant);
    if (!this.#store.has(namespace, pathHash)) return undefined;
    const got = this.#store.get(namespace, pathHash, this.#numBytes);
    if (got.kind !== 'hit' || got.bytes.length !== this.#numBytes) return undefined;
    const result = allocate(1, reader);
    if (result.kind !== 'allocated') return undefined;
    const tag = result.tags[0] as Tag;
    try {
      if (this.#pool.isLent(tag.page)) return this.#letGo(tag, reader);
      this.#pool.checkWrite(reader, [tag]);
    } catch (error) {
      if (error instanceof PageCheckError) return this.#letGo(tag, reader);
      throw error;
    }
    this.#pool.scatterSlots(tag.page, 0, this.#pool.pageSize, got.bytes);
    this.#pool.stamp(tag, this.#pool.pageSize);
    return tag;
  }

  #letGo(tag: Tag, owner: Owner): undefined {
    this.#pool.ledger.relinquish([tag], owner);
    return undefined;
  }
}
