// PeerPrefixStore: one node's part in the cluster-wide prefix store — the holder and the
// requester of the prefix lease protocol over its prefix cache and its cluster transport.
// A prefill worker calls fill() before a request enters its scheduler; every node that has a
// prefix cache serves peers' fetches.
// Owns: resolving a peer's namespace to one of this node's (tenant + this model + this pool's KV
// layout: anything else is refused), the pages a request asks a peer for (the prompt's full
// pages after its own cached run, pool and disk tier), and installing what was accepted.
// Must never: serve or install a page under a key without the namespace (the faults
// `prefix-key-without-tenant` and `ignore-prefix-lease` are the negative controls), or make a
// request wait on a peer past the fetch deadline.
import { TENANT_PATTERN, NO_FAULTS, asTenantId, type FaultSet, type TenantId } from '../core/index.js';
import { pathHashes, poolNamespace, type Owner, type PagePool, type PrefixCache } from '../pages/index.js';
import type { PeerId } from './machine.js';
import { PrefixHolder, type HolderIo, type HolderStats, type Schedule } from './prefix-fetch-holder.js';
import type { PrefixMessage } from './prefix-fetch-messages.js';
import { PrefixRequester, type RequesterStats } from './prefix-fetch-requester.js';

export interface PeerPrefixStoreOptions {
  readonly cache: PrefixCache;
  readonly pool: PagePool;
  /** The model's fingerprint: part of every namespace. */
  readonly model: string;
  readonly io: HolderIo;
  readonly schedule: Schedule;
  readonly faults?: FaultSet;
  readonly fetchTimeoutMs?: number;
  readonly leaseTimeoutMs?: number;
  readonly highWaterBytes?: number;
}

export interface PeerStoreStats {
  readonly holder: HolderStats;
  readonly requester: RequesterStats;
  readonly leasesOpen: number;
  /** Fetched pages installed in the prefix cache (fewer than fetched when the pool had no room). */
  readonly pagesInstalled: number;
}

export interface FillResult {
  /** Pages asked of the holder (0: this node held the whole prefix, or it is shorter than a page). */
  readonly asked: number;
  readonly installed: number;
}

/** The tenant a namespace (core/cache-namespace.ts) names; undefined when it is not one. */
export function tenantOfNamespace(namespace: string): TenantId | undefined {
  let parts: unknown;
  try {
    parts = JSON.parse(namespace);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parts) || parts[0] !== 'tessera-cache-ns-v1') return undefined;
  const tenant: unknown = parts[1];
  return typeof tenant === 'string' && TENANT_PATTERN.test(tenant) ? asTenantId(tenant) : undefined;
}

export class PeerPrefixStore {
  readonly #o: PeerPrefixStoreOptions;
  readonly #holder: PrefixHolder;
  readonly #requester: PrefixRequester;
  #pagesInstalled = 0;
  #nextOwner = 1;

  constructor(options: PeerPrefixStoreOptions) {
    this.#o = options;
    const faults = options.faults ?? NO_FAULTS;
    const pin = !faults.has('ignore-prefix-lease');
    const anyTenant = faults.has('prefix-key-without-tenant');
    this.#holder = new PrefixHolder({
      io: options.io,
      schedule: options.schedule,
      source: (namespace, hashes) => {
        const tenant = tenantOfNamespace(namespace);
        if (tenant === undefined || this.namespaceOf(tenant) !== namespace) return 'namespace';
        return options.cache.lease(tenant, hashes, pin, anyTenant);
      },
      ...(options.leaseTimeoutMs === undefined ? {} : { leaseTimeoutMs: options.leaseTimeoutMs }),
      ...(options.highWaterBytes === undefined ? {} : { highWaterBytes: options.highWaterBytes }),
    });
    this.#requester = new PrefixRequester({
      send: (peer, m) => options.io.send(peer, m),
      pageBytes: options.pool.slotRangeBytes(options.pool.pageSize),
      schedule: options.schedule,
      ...(options.fetchTimeoutMs === undefined ? {} : { timeoutMs: options.fetchTimeoutMs }),
    });
  }

  namespaceOf(tenant: TenantId): string {
    return poolNamespace(this.#o.pool, this.#o.model, tenant);
  }

  /** A prefix-store message from an authenticated peer (the transport's `prefix` handler). */
  received(from: PeerId, m: PrefixMessage): void {
    switch (m.type) {
      case 'PrefixFetch':
        return this.#holder.received(from, m);
      case 'PrefixPages':
      case 'PrefixDone':
        return this.#requester.received(from, m);
    }
  }

  /** The connection to peer closed: leases it held end, fetches from it settle. */
  closed(peer: PeerId): void {
    this.#holder.closed(peer);
    this.#requester.closed(peer);
  }

  close(): void {
    this.#holder.close();
    this.#requester.close();
  }

  /**
   * Before `tokens` (a prompt) enters the scheduler: the full pages of its prefix (all but its
   * last token, as match() looks up) after what this node holds in any tier, fetched from holder
   * and installed as tenant's cached pages. Resolves once installed or missed (never rejects).
   */
  async fill(tenant: TenantId, tokens: readonly number[], holder: PeerId): Promise<FillResult> {
    const prompt = tokens.slice(0, Math.max(0, tokens.length - 1));
    const local = this.#o.cache.localRun(tenant, prompt);
    const hashes = pathHashes(prompt, this.#o.pool.pageSize).slice(local);
    if (hashes.length === 0) return { asked: 0, installed: 0 };
    const outcome = await this.#requester.fetch(holder, this.namespaceOf(tenant), hashes);
    if (outcome.pages.length === 0) return { asked: hashes.length, installed: 0 };
    const owner: Owner = { rid: `peer-fetch-${this.#nextOwner++}` as Owner['rid'], tenant };
    const installed = this.#o.cache.adopt(owner, prompt, local, outcome.pages);
    this.#pagesInstalled += installed;
    return { asked: hashes.length, installed };
  }

  stats(): PeerStoreStats {
    return {
      holder: this.#holder.stats(),
      requester: this.#requester.stats(),
      leasesOpen: this.#holder.numOpenLeases,
      pagesInstalled: this.#pagesInstalled,
    };
  }
}
