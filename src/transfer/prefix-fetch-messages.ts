// The prefix lease protocol's messages (issue 34's cluster-wide prefix store): a prefill that
// misses a tenant's prefix asks another node that holds its pages. Names are the brief's and
// spec/'s. They travel on the same authenticated connections, codec and frame checks as the PD
// transfer (codec.ts, kinds 32..34), but they are not `Message`s: no transfer machine sees them;
// a node hands them to its prefix store (prefix-fetch-holder.ts, prefix-fetch-requester.ts).
//
//   R -> H  PrefixFetch  fetchId, epoch (R's), namespace (core/cache-namespace.ts), the chained
//                        path hashes (pages/spill-tier.ts) of the pages R wants, in order
//   H -> R  PrefixPages  one page per frame, in order: its position, path hash, xxh64, bytes
//   H -> R  PrefixDone   how many pages H sent (fewer than asked: the rest is a miss)
//
// Must never: carry a token id or a page without the namespace and path hash it answers.
export interface PrefixFetch {
  readonly type: 'PrefixFetch';
  readonly fetchId: number;
  /** The requester's epoch (random per process): a fetch id is never reused across restarts. */
  readonly epoch: number;
  readonly namespace: string;
  readonly pathHashes: readonly string[];
}

export interface PrefixPages {
  readonly type: 'PrefixPages';
  readonly fetchId: number;
  readonly epoch: number;
  readonly namespace: string;
  /** Position of this page in the fetch's pathHashes. */
  readonly index: number;
  readonly pathHash: string;
  /** xxh64 (16 hex digits) of the payload. */
  readonly xxh64: string;
  /** The page's KV, all layers (PagePool.gatherSlots order). */
  readonly payload: Uint8Array;
}

export interface PrefixDone {
  readonly type: 'PrefixDone';
  readonly fetchId: number;
  readonly epoch: number;
  /** Pages sent (the first `count` path hashes asked). */
  readonly count: number;
}

export type PrefixMessage = PrefixFetch | PrefixPages | PrefixDone;
export type PrefixMessageType = PrefixMessage['type'];

/** Most path hashes in one fetch (a 1M-token prompt of 16-token pages). */
export const MAX_FETCH_PAGES = 65_536;
