// The spill tier's contract, seen from the pool: where the prefix cache sends the pages it
// evicts, and where match() looks for the pages after its last cached one.
// Owns: the SpillStore interface (implemented with files in src/worker/disk-tier.ts), the
// identity of a spilled page (its cache namespace and the hash of every token id on its path
// from the root), and PageSpill, which moves one page's bytes between the pool and a store.
// With a hasher (KvSpill.hasher), each page is put with its route (SpillRoute: its keyed tenant
// tag and block hash, and the key's fingerprint for this model and layout), so a store that
// keeps it can report the page after a restart (routes()), only to a hasher of the same key.
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
import type { PrefixHasher } from './prefix-hash.js';
import type { AllocateResult, Owner } from './page-entry.js';
import type { PagePool } from './pool.js';

/** A namespace, or '' under the fault `spill-without-namespace`. */
export type SpillNamespace = CacheNamespace | '';

export interface SpillEntry {
  readonly namespace: SpillNamespace;
  readonly pathHash: string;
  /** The page's KV, all layers (PagePool.gatherSlots order). */
  readonly bytes: Uint8Array;
  /** What a report names it by, when it was put with a route. */
  readonly route?: SpillRoute;
}

/** A stored page's keyed tenant tag and block hash (prefix-hash.ts): what a report names it by. Never a token id or a tenant's name. */
export interface SpillRouteHint {
  readonly tenantTag: string;
  readonly blockHash: string;
}

/** A hint and the fingerprint of the key it was computed with (PrefixHasher.keyId, for this model and layout). */
export interface SpillRoute extends SpillRouteHint {
  readonly keyId: string;
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
  put(
    namespace: SpillNamespace,
    pathHash: string,
    numBytes: number,
    fill: (into: Uint8Array) => void,
    route?: SpillRoute,
  ): void;
  /**
   * The page's bytes after checking namespace, path hash, length and checksum; synchronous. The
   * bytes may live in a buffer the store reuses: copy them before the next call.
   */
  get(namespace: SpillNamespace, pathHash: string, numBytes: number): SpillLoad;
  stats(): SpillStats;
  /**
   * The hints of stored pages put with a route of this keyId (kept across restarts), most recently
   * used first, at most limit. A store without it reports nothing.
   */
  routes?(keyId: string, limit: number): readonly SpillRouteHint[];
}

/** What a worker hands its prefix cache to spill into. */
export interface KvSpill {
  readonly store: SpillStore;
  /** The model's fingerprint: part of every page's namespace. */
  readonly model: string;
  /** What a spilled page's route is keyed with (the cluster's); without it pages are put with none. */
  readonly hasher?: PrefixHasher;
}

export const ROOT_PATH_HASH = '0'.repeat(64);

/** The path hash of a page, from its parent's and its own token ids (joined with ','). */
export function nextPathHash(parent: string, pageKey: string): string {
  return createHash('sha256').update(`tessera-kv-path-v1|${parent}|${pageKey}`).digest('hex');
}

/** The chained path hashes of the first full pages of tokens (at most maxPages). */
export function pathHashes(tokens: readonly number[], pageSize: number, maxPages = Infinity): string[] {
  const out: string[] = [];
  let hash = ROOT_PATH_HASH;
  for (let i = 0; i < Math.min(Math.floor(tokens.length / pageSize), maxPages); i++) {
    hash = nextPathHash(hash, tokens.slice(i * pageSize, (i + 1) * pageSize).join(','));
    out.push(hash);
  }
  return out;
}

/** The namespace of a tenant's pages in this pool for this model (what every tier beyond the pool keys by). */
export function poolNamespace(pool: PagePool, model: string, tenant: TenantId): CacheNamespace {
  const kvLayout = { dtype: kvDtypeOf(pool.kv), pageSize: pool.pageSize, bytesPerToken: pool.slotRangeBytes(1) };
  return cacheNamespace({ tenant, model, kvLayout });
}

/**
 * One page's bytes (a whole page, all layers) into a fresh page allocated to reader and stamped
 * full: allocate, checkWrite (never a page lent to the step in flight), scatter, stamp. Undefined
 * when there is no room or the check refuses (nothing is held then).
 */
export function writeFreshPage(
  pool: PagePool,
  reader: Owner,
  bytes: Uint8Array,
  allocate: (numPages: number, owner: Owner) => AllocateResult,
): Tag | undefined {
  const result = allocate(1, reader);
  if (result.kind !== 'allocated') return undefined;
  const tag = result.tags[0] as Tag;
  const letGo = (): undefined => void pool.ledger.relinquish([tag], reader);
  try {
    if (pool.isLent(tag.page)) return letGo();
    pool.checkWrite(reader, [tag]);
  } catch (error) {
    if (error instanceof PageCheckError) return letGo();
    throw error;
  }
  pool.scatterSlots(tag.page, 0, pool.pageSize, bytes);
  pool.stamp(tag, pool.pageSize);
  return tag;
}

/** Moves single pages between one pool and one store. */
export class PageSpill {
  readonly #pool: PagePool;
  readonly #store: SpillStore;
  readonly #model: string;
  readonly #dropNamespace: boolean;
  readonly #numBytes: number;
  readonly #hasher: PrefixHasher | undefined;
  /** What a route's key fingerprint covers besides the key: the model and KV layout (not the tenant). */
  readonly #scope: string;
  /** The fingerprint of the hasher's key for #scope; undefined without a keyed hasher. */
  readonly #keyId: string | undefined;

  constructor(pool: PagePool, spill: KvSpill, faults: FaultSet = NO_FAULTS) {
    this.#pool = pool;
    this.#store = spill.store;
    this.#model = spill.model;
    this.#scope = JSON.stringify([
      'tessera-spill-route-v1',
      spill.model,
      kvDtypeOf(pool.kv),
      pool.pageSize,
      pool.slotRangeBytes(1),
    ]);
    this.#keyId = spill.hasher?.keyId(this.#scope);
    this.#hasher = this.#keyId === undefined ? undefined : spill.hasher;
    this.#dropNamespace = faults.has('spill-without-namespace');
    this.#numBytes = pool.slotRangeBytes(pool.pageSize);
  }

  namespaceOf(tenant: TenantId): SpillNamespace {
    return this.#dropNamespace ? '' : poolNamespace(this.#pool, this.#model, tenant);
  }

  /** Whether the store may hold tenant's page at pathHash (no I/O). */
  has(tenant: TenantId, pathHash: string): boolean {
    return this.#store.has(this.namespaceOf(tenant), pathHash);
  }

  /** A copy of tenant's stored page at pathHash after the store's checks; undefined on a miss or a refusal. */
  copyOut(tenant: TenantId, pathHash: string): Uint8Array | undefined {
    const namespace = this.namespaceOf(tenant);
    if (!this.#store.has(namespace, pathHash)) return undefined;
    const got = this.#store.get(namespace, pathHash, this.#numBytes);
    return got.kind === 'hit' && got.bytes.length === this.#numBytes ? got.bytes.slice() : undefined;
  }

  /** The hasher routes are keyed with, when there is one and it is keyed. */
  get hasher(): PrefixHasher | undefined {
    return this.#hasher;
  }

  /**
   * A cached page is about to be evicted: hand a copy of its bytes to the store (unless it has
   * them), with its route (`hint`, asked for only then, computed with this.hasher) when there is a hasher.
   */
  spill(tenant: TenantId, pathHash: string, page: PageId, hint?: () => SpillRouteHint): void {
    const namespace = this.namespaceOf(tenant);
    if (this.#store.has(namespace, pathHash)) return;
    const keyId = this.#keyId;
    const route = keyId === undefined || hint === undefined ? undefined : { keyId, ...hint() };
    this.#store.put(
      namespace,
      pathHash,
      this.#numBytes,
      (into) => {
        this.#pool.gatherSlots(page, 0, this.#pool.pageSize, into);
      },
      route,
    );
  }

  /** The hints of stored pages whose route was keyed like `hasher`'s for this model and layout (most recent first). */
  routes(hasher: PrefixHasher, limit: number): readonly SpillRouteHint[] {
    const keyId = hasher.keyId(this.#scope);
    return keyId === undefined ? [] : (this.#store.routes?.(keyId, limit) ?? []);
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
    return writeFreshPage(this.#pool, reader, got.bytes, allocate);
  }
}
