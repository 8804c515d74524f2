// What a prefill worker tells the router about its prefix cache in /health (`prefixCache`):
// per tenant tag, the chained block hashes of its cached pages in any tier (the pool's, and those its
// disk tier holds while they stay there, found at start-up too: their files record tag and hash, and only
// those keyed with this cluster secret are reported: pages/prefix-cache.ts, worker/disk-tier.ts;
// pages/prefix-hash.ts: all keyed with the cluster secret), and how many prompt tokens it looked up and
// found cached. The router routes on it (router/prefix-index.ts).
// Must never: report anything but keyed hashes and counts (no token ids, no tenant names), or more
// than REPORT_LIMIT hashes.
import type { PrefixCache, PrefixHasher } from '../pages/index.js';

/** Most block hashes in one report (the most recently used pages first). */
export const REPORT_LIMIT = 8192;

export function prefixReport(cache: PrefixCache | undefined, hasher: PrefixHasher): Record<string, unknown> {
  if (cache === undefined) return {};
  const { lookupTokens, hitTokens } = cache.lookupStats();
  return {
    prefixCache: { lookupTokens, hitTokens, tenants: Object.fromEntries(cache.blockHashReport(REPORT_LIMIT, hasher)) },
  };
}
