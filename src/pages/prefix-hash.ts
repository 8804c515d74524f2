// Prefix block hashes: what a prefill worker reports about its prefix cache and what the router
// computes for a request, so the router can tell which worker holds the longest cached prefix of
// a prompt without seeing the cache. One hash per full page, chained: block i's hash covers
// the tenant and every token of pages 0..i, so equal hashes mean an equal tenant and prefix.
//   h(-1) = xxh64("tessera-prefix-v1|" + tenant)      h(i) = xxh64(tokens of page i, seed h(i-1))
// Routing only: a collision costs a cache miss, never a wrong read (the worker's own cache
// matches exact token ids, per tenant).
import { xxh64 } from '@node-rs/xxhash';

const hex = (h: bigint): string => h.toString(16).padStart(16, '0');

export function prefixSeedHash(tenant: string): string {
  return hex(xxh64(`tessera-prefix-v1|${tenant}`));
}

/** The hash of the block after `parent`, whose page holds the tokens of `pageKey` (ids joined with ','). */
export function nextBlockHash(parent: string, pageKey: string): string {
  return hex(xxh64(pageKey, BigInt(`0x${parent}`)));
}

/** The chained hashes of the first full pages of tokens (at most maxBlocks), for tenant. */
export function blockHashes(
  tenant: string,
  tokens: readonly number[],
  pageSize: number,
  maxBlocks = Infinity,
): string[] {
  const out: string[] = [];
  let h = prefixSeedHash(tenant);
  for (let i = 0; i < Math.min(Math.floor(tokens.length / pageSize), maxBlocks); i++) {
    h = nextBlockHash(h, tokens.slice(i * pageSize, (i + 1) * pageSize).join(','));
    out.push(h);
  }
  return out;
}
