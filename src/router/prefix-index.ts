// Prefix-aware choice of the prefill worker, pure. Each prefill worker reports in /health the
// chained block hashes of its cached pages per tenant (worker/prefix-report.ts); the router
// keeps them per worker as tenant -> set of hashes, and for a request computes its own prompt's
// block hashes for its tenant and counts, per worker, how many leading blocks that worker holds.
// The index is keyed by tenant first (by the tenant's keyed tag: reports never name tenants): a
// request only ever looks at its own tenant's hashes (and the hashes are seeded with the tenant as
// well), so tenant B's identical prompt never routes by tenant A's prefix.
// The load bound: a worker is given a request by prefix only if its in-flight count after it
// stays at most max(1, LOAD_BOUND x the mean over the candidates after it); otherwise the
// request goes by load (the least loaded worker, pair-policy.ts). So no worker is ever pushed
// above 1.5x the mean by the prefix rule (sglang #14305: load collapsing onto the cache-rich
// worker).
// When the load bound sends a request elsewhere, the choice still names the best holder: the
// router passes it to the chosen prefill as a hint (prefix-routing.ts), which fetches the pages
// from it (the cluster-wide prefix store) instead of recomputing them. Reports count every tier a
// prefill holds (pool and disk: worker/prefix-report.ts).
// Must never: read a clock or a socket; use another tenant's hashes; route by a report it did
// not get (no report: no prefix for that worker).
import type { PrefixHasher } from '../pages/index.js';

export const LOAD_BOUND = 1.5;

export interface PrefixView {
  /** tenant tag (PrefixHasher.tenantTag) -> hashes of the blocks cached for it. */
  readonly tenants: ReadonlyMap<string, ReadonlySet<string>>;
  readonly lookupTokens: number;
  readonly hitTokens: number;
}

/** A worker's /health `prefixCache`, checked; undefined when absent or malformed. */
export function parsePrefixReport(value: unknown): PrefixView | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  const tenants = v['tenants'];
  if (typeof tenants !== 'object' || tenants === null) return undefined;
  const map = new Map<string, Set<string>>();
  for (const [tenant, hashes] of Object.entries(tenants as Record<string, unknown>)) {
    if (Array.isArray(hashes)) map.set(tenant, new Set(hashes.filter((h): h is string => typeof h === 'string')));
  }
  const num = (x: unknown): number => (typeof x === 'number' && Number.isFinite(x) ? x : 0);
  return { tenants: map, lookupTokens: num(v['lookupTokens']), hitTokens: num(v['hitTokens']) };
}

export interface PrefillCandidate {
  readonly address: string;
  readonly inFlight: number;
  readonly prefix: PrefixView | undefined;
}

export type PrefillChoice =
  | { readonly by: 'prefix'; readonly address: string; readonly matchedBlocks: number }
  | {
      readonly by: 'load';
      readonly reason: 'no-match' | 'bound' | 'no-candidate';
      /** Under 'bound': the prefill holding the longest prefix, for a fetch instead of a recompute. */
      readonly holder?: { readonly address: string; readonly matchedBlocks: number };
    };

/** Leading blocks of `hashes` that `view` holds for a tenant's tag. */
export function matchedBlocks(view: PrefixView | undefined, tag: string, hashes: readonly string[]): number {
  const mine = view?.tenants.get(tag);
  if (mine === undefined) return 0;
  let n = 0;
  while (n < hashes.length && mine.has(hashes[n] as string)) n++;
  return n;
}

/**
 * The prefill holding the longest cached prefix of tokens for tenant, if the load bound allows
 * it; else 'load'. Only the prompt without its last token can hit (a step computes at least one).
 */
export function choosePrefill(
  hasher: PrefixHasher,
  tenant: string,
  tokens: readonly number[],
  pageSize: number,
  candidates: readonly PrefillCandidate[],
  bound = LOAD_BOUND,
  acrossTenants = false,
): PrefillChoice {
  if (candidates.length === 0) return { by: 'load', reason: 'no-candidate' };
  const prompt = tokens.slice(0, Math.max(0, tokens.length - 1));
  const tag = hasher.tenantTag(tenant);
  const hashes = hasher.blockHashes(tag, prompt, pageSize);
  // The fault share-prefix-index-across-tenants: match every tenant's blocks (llm-d-router PR #1494's bug).
  const matched = (c: PrefillCandidate): number =>
    !acrossTenants
      ? matchedBlocks(c.prefix, tag, hashes)
      : Math.max(
          0,
          ...[...(c.prefix?.tenants.keys() ?? [])].map((t) =>
            matchedBlocks(c.prefix, t, hasher.blockHashes(t, prompt, pageSize)),
          ),
        );
  let best: PrefillCandidate | undefined;
  let bestBlocks = 0;
  for (const c of candidates) {
    const n = matched(c);
    if (n > bestBlocks || (n === bestBlocks && n > 0 && best !== undefined && c.inFlight < best.inFlight)) {
      best = c;
      bestBlocks = n;
    }
  }
  if (best === undefined) return { by: 'load', reason: 'no-match' };
  const total = candidates.reduce((sum, c) => sum + c.inFlight, 0) + 1;
  if (best.inFlight + 1 > Math.max(1, (bound * total) / candidates.length))
    return { by: 'load', reason: 'bound', holder: { address: best.address, matchedBlocks: bestBlocks } };
  return { by: 'prefix', address: best.address, matchedBlocks: bestBlocks };
}
