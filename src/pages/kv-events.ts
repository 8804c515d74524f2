// KV events: what the prefix cache tells an external router (llm-d's KV-cache indexer, Dynamo's
// KvEventPublisher consume the same two kinds) about the pages it holds, one event per page:
//   BlockStored   a full page was cached (computed, or loaded back from the spill tier)
//   BlockRemoved  it was evicted
// Each names the page by its keyed block hash (prefix-hash.ts: HMAC with the cluster secret,
// chained over the tenant's tag and every earlier page) and the tenant by its keyed tag.
// KvEventRing keeps a node's latest events for its readers (api/ops/kv-events-route.ts), each with a
// sequence number (1, 2, ...): a bounded ring, so a reader that falls further behind than the ring
// holds is told so (`reset`: drop what it knows of this node, then apply what follows), and so is
// one whose cursor is past the last event (it read an earlier run of this process).
// Must never: carry a token id, a tenant's name, or an unkeyed hash (only the fault
// `unkeyed-prefix-hashes`, which makes the hasher itself unkeyed, changes that); grow without bound.
import { assert } from '../core/index.js';
import type { PrefixHasher } from './prefix-hash.js';

export type KvEvent =
  | {
      readonly type: 'BlockStored';
      /** The tenant's keyed tag (PrefixHasher.tenantTag). */
      readonly tenant: string;
      readonly blockHash: string;
      /** The block before it; null for a prompt's first page. */
      readonly parentHash: string | null;
      /** The digest of the LoRA adapter its KV was computed under (from the KV tenant, kvTenantOf); null: the base model. */
      readonly adapterDigest: string | null;
    }
  | { readonly type: 'BlockRemoved'; readonly tenant: string; readonly blockHash: string };

/** Where a prefix cache publishes its events, and the hasher that names their blocks. */
export interface KvEventSink {
  readonly hasher: PrefixHasher;
  publish(event: KvEvent): void;
}

/** One published event, as the ring keeps it. */
export interface KvEventRecord {
  readonly seq: number;
  /** Wall-clock milliseconds when it was published. */
  readonly atMs: number;
  readonly event: KvEvent;
}

/** What a reader gets after its cursor. */
export interface KvEventRead {
  /** True when events after the cursor were dropped (or the cursor is from another run): start over. */
  readonly reset: boolean;
  readonly records: readonly KvEventRecord[];
  /** The cursor for the next read: the last record's seq (the cursor itself when nothing was new). */
  readonly next: number;
}

export const KV_EVENT_RING_SIZE = 8192;

/** A node's latest KV events, at most `capacity`; the sink its prefix cache publishes into. */
export class KvEventRing implements KvEventSink {
  readonly hasher: PrefixHasher;
  readonly capacity: number;
  readonly #slots: (KvEventRecord | undefined)[];
  readonly #now: () => number;
  readonly #listeners = new Set<() => void>();
  #lastSeq = 0;

  constructor(hasher: PrefixHasher, capacity = KV_EVENT_RING_SIZE, now: () => number = Date.now) {
    assert(Number.isSafeInteger(capacity) && capacity > 0, () => `KvEventRing: capacity ${capacity}`);
    this.hasher = hasher;
    this.capacity = capacity;
    this.#slots = new Array<KvEventRecord | undefined>(capacity);
    this.#now = now;
  }

  /** The last event's seq (0: none yet). */
  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** Listeners subscribed now (open streams). */
  get numListeners(): number {
    return this.#listeners.size;
  }

  /** The oldest seq the ring still holds (lastSeq + 1 when it holds none). */
  get oldestSeq(): number {
    return Math.max(1, this.#lastSeq - this.capacity + 1);
  }

  publish(event: KvEvent): void {
    const seq = ++this.#lastSeq;
    this.#slots[seq % this.capacity] = { seq, atMs: this.#now(), event };
    for (const listener of this.#listeners) listener();
  }

  /** Up to `max` events after seq `after` (0: a new reader, from the oldest held). */
  read(after: number, max: number): KvEventRead {
    assert(Number.isSafeInteger(after) && after >= 0, () => `KvEventRing.read: cursor ${after}`);
    const oldest = this.oldestSeq;
    // Behind what the ring holds (events it missed are gone), or ahead of it (another run's cursor).
    const reset = after > this.#lastSeq || (after > 0 && after < oldest - 1);
    const from = after === 0 || reset ? oldest : after + 1;
    const records: KvEventRecord[] = [];
    for (let seq = from; seq <= this.#lastSeq && records.length < max; seq++)
      records.push(this.#slots[seq % this.capacity] as KvEventRecord);
    return { reset, records, next: from + records.length - 1 };
  }

  /** Calls `listener` (synchronously, on the publishing thread: keep it cheap) after each publish; returns the unsubscribe. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }
}
