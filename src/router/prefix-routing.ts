// The router's routing policy over the pair policy: `prefix` (default) first asks the prefix
// index for the prefill holding the longest cached prefix of the request for its tenant, within
// the load bound (prefix-index.ts), and pairs it with the least loaded compatible decode; every
// other request, and every request under `load`, gets the least loaded pair (pair-policy.ts).
// Counts what it did: routed by prefix, by load (and why), the peak in-flight of a prefix pick
// over the mean, and each prefill's own hit rate as it reports it.
// When the holder of a request's longest prefix is over the load bound and the request goes
// elsewhere by load, the router remembers the holder as a hint for that request's Prefill
// (pd-router.ts adds it as `prefixHolder`): the chosen prefill fetches the pages from the holder.
// Must never: pick a pair pair-policy would not (a prefix pick goes through pickPair too), or hint
// a holder of another tenant's prefix (the index is matched for the request's own tenant only).
import type { PrefixHasher } from '../pages/index.js';
import { kvTenantOf, type RequestId } from '../core/index.js';
import type { ClientRequest, Pair, PeerId } from '../transfer/index.js';
import { pickPair, type PolicyChecks } from './pair-policy.js';
import { choosePrefill, LOAD_BOUND } from './prefix-index.js';
import type { WorkerEntry, WorkerRegistry } from './workers.js';

export type RoutingPolicy = 'prefix' | 'load';

export interface RoutingStats {
  readonly policy: RoutingPolicy;
  readonly loadBound: number;
  byPrefix: number;
  byLoad: number;
  /** Why requests went by load under `prefix`. */
  loadReasons: Record<string, number>;
  /** The highest (in-flight after the pick) / (mean after the pick) of a prefix pick, with mean >= 1. */
  peakPrefixLoadOverMean: number;
  /** Picks made, and the router's own time in them (hashing the prompt, matching the index, the pair policy). */
  picks: number;
  pickMs: number;
  /** Requests sent by load to a prefill that lacks their prefix, with a hint naming its holder. */
  hinted: number;
}

/** Most hints kept for picks whose Prefill has not been sent yet (oldest dropped first). */
const MAX_HINTS = 4096;

export class PrefixRouting {
  readonly #registry: WorkerRegistry;
  readonly #checks: PolicyChecks;
  readonly #stats: RoutingStats;
  readonly #hasher: PrefixHasher;
  /** Per client request: the prefill picked and the holder of its prefix (a hint for its Prefill). */
  readonly #hints = new Map<RequestId, { readonly prefill: PeerId; readonly holder: string }>();

  /** Test-only fault share-prefix-index-across-tenants: the negative control of the tenant property. */
  readonly #acrossTenants: boolean;
  /** Fault lora-drop-from-key, as on the workers: a request's KV owner is its tenant alone (kvTenantOf). */
  readonly #dropAdapter: boolean;

  constructor(
    registry: WorkerRegistry,
    checks: PolicyChecks,
    policy: RoutingPolicy,
    hasher: PrefixHasher,
    acrossTenants = false,
    dropAdapter = false,
  ) {
    this.#registry = registry;
    this.#dropAdapter = dropAdapter;
    this.#hasher = hasher;
    this.#acrossTenants = acrossTenants;
    this.#checks = checks;
    this.#stats = {
      policy,
      loadBound: LOAD_BOUND,
      byPrefix: 0,
      byLoad: 0,
      loadReasons: {},
      peakPrefixLoadOverMean: 0,
      picks: 0,
      pickMs: 0,
      hinted: 0,
    };
  }

  pick(request: ClientRequest, avoid: { readonly prefills: readonly PeerId[] }): Pair | undefined {
    const started = performance.now();
    try {
      return this.#pick(request, avoid);
    } finally {
      this.#stats.picks++;
      this.#stats.pickMs += performance.now() - started;
    }
  }

  #pick(request: ClientRequest, avoid: { readonly prefills: readonly PeerId[] }): Pair | undefined {
    const views = this.#registry.views();
    if (this.#stats.policy === 'prefix') {
      const candidates = this.#registry.entries
        .filter(
          (e): e is WorkerEntry & { address: string } =>
            e.role === 'prefill' &&
            e.address !== undefined &&
            e.state === 'up' &&
            e.admitted &&
            !e.draining &&
            !avoid.prefills.includes(e.address),
        )
        .map((e) => ({ ...e, inFlight: this.#registry.inFlight(e) }));
      const pageSize = candidates[0]?.limits?.pageSize ?? 0;
      const choice =
        pageSize > 0
          ? choosePrefill(
              this.#hasher,
              // Prefills report their cache by KV owner: under an adapter, the tenant joined with its digest.
              kvTenantOf(request.tenant, request.adapter, this.#dropAdapter),
              request.tokens,
              pageSize,
              candidates,
              LOAD_BOUND,
              this.#acrossTenants,
            )
          : ({ by: 'load', reason: 'no-candidate' } as const);
      if (choice.by === 'prefix') {
        const pair = pickPair(
          request,
          avoid,
          views.filter((v) => v.role === 'decode' || v.address === choice.address),
          this.#checks,
        );
        if (pair !== undefined) {
          this.#stats.byPrefix++;
          const total = candidates.reduce((sum, c) => sum + c.inFlight, 0) + 1;
          const mean = total / candidates.length;
          const mine = (candidates.find((c) => c.address === choice.address)?.inFlight ?? 0) + 1;
          if (mean >= 1) this.#stats.peakPrefixLoadOverMean = Math.max(this.#stats.peakPrefixLoadOverMean, mine / mean);
          return pair;
        }
        this.#stats.loadReasons['incompatible'] = (this.#stats.loadReasons['incompatible'] ?? 0) + 1;
      } else {
        this.#stats.loadReasons[choice.reason] = (this.#stats.loadReasons[choice.reason] ?? 0) + 1;
      }
      const pair = pickPair(request, avoid, views, this.#checks);
      this.#hints.delete(request.rid);
      if (pair === undefined) return undefined;
      this.#stats.byLoad++;
      const holder = choice.by === 'load' ? choice.holder : undefined;
      if (holder !== undefined && holder.address !== pair.prefill) {
        this.#hints.set(request.rid, { prefill: pair.prefill, holder: holder.address });
        if (this.#hints.size > MAX_HINTS) this.#hints.delete(this.#hints.keys().next().value as RequestId);
        this.#stats.hinted++;
      }
      return pair;
    }
    const pair = pickPair(request, avoid, views, this.#checks);
    if (pair !== undefined) this.#stats.byLoad++;
    return pair;
  }

  /** The holder to hint in the Prefill of client request rid sent to prefill, once; undefined: none. */
  takeHint(rid: RequestId, prefill: PeerId): string | undefined {
    const hint = this.#hints.get(rid);
    this.#hints.delete(rid);
    return hint?.prefill === prefill ? hint.holder : undefined;
  }

  /** For /health: the counts, and each prefill's hit rate (tokens found cached / tokens looked up) as it reports it. */
  report(): RoutingStats & { workers: { url: string; lookupTokens: number; hitTokens: number; hitRate: number }[] } {
    const workers = this.#registry.entries
      .filter((e) => e.role === 'prefill' && e.prefix !== undefined)
      .map((e) => {
        const p = e.prefix as NonNullable<WorkerEntry['prefix']>;
        return {
          url: e.url,
          lookupTokens: p.lookupTokens,
          hitTokens: p.hitTokens,
          hitRate: p.lookupTokens === 0 ? 0 : p.hitTokens / p.lookupTokens,
        };
      });
    return { ...this.#stats, loadReasons: { ...this.#stats.loadReasons }, workers };
  }
}
