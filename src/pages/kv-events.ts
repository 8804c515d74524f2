// KV events: what the prefix cache tells an external router (llm-d's KV-cache indexer, Dynamo's
// KvEventPublisher consume the same two kinds) about the pages it holds, one event per page:
//   BlockStored   a full page was cached (computed, or loaded back from the spill tier)
//   BlockRemoved  it was evicted
// Each names the page by its keyed block hash (prefix-hash.ts: HMAC with the cluster secret,
// chained over the tenant's tag and every earlier page) and the tenant by its keyed tag.
// Must never: carry a token id, a tenant's name, or an unkeyed hash (only the fault
// `unkeyed-prefix-hashes`, which makes the hasher itself unkeyed, changes that).
import type { PrefixHasher } from './prefix-hash.js';

export type KvEvent =
  | {
      readonly type: 'BlockStored';
      /** The tenant's keyed tag (PrefixHasher.tenantTag). */
      readonly tenant: string;
      readonly blockHash: string;
      /** The block before it; null for a prompt's first page. */
      readonly parentHash: string | null;
    }
  | { readonly type: 'BlockRemoved'; readonly tenant: string; readonly blockHash: string };

/** Where a prefix cache publishes its events, and the hasher that names their blocks. */
export interface KvEventSink {
  readonly hasher: PrefixHasher;
  publish(event: KvEvent): void;
}
