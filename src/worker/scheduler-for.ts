// The scheduler of a worker of any role, from the worker's options: the same limits everywhere;
// a tenant-scoped prefix cache where prompts are known (co-located and prefill), none on decode
// (a decode node never sees the prompt's ids, so its pages could never be matched). With
// --kv-disk, that cache spills evicted pages to the disk tier and loads them back; with a KV
// event sink (serve's and each PD worker's /kv-events ring), it publishes BlockStored/BlockRemoved.
import type { FaultSet } from '../core/index.js';
import type { KvEventSink, KvSpill, PagePool } from '../pages/index.js';
import { Scheduler, type Role, type SpecOptions } from '../scheduler/index.js';
import { CountedPrefixCache, setTierSource } from './tier-views.js';

export interface SchedulerLimits {
  readonly pool: PagePool;
  readonly contextLength: number;
  readonly maxRunningRequests: number;
  readonly chunkedPrefillSize: number;
  readonly maxWaiting: number;
  readonly faults: FaultSet;
  readonly eosTokenIds: readonly number[];
  /** Logits rows a step gives prompt log-probabilities beyond one per request (the runner's maxStepLogits - maxRunningRequests); default 0. */
  readonly promptLogitRows?: number;
  /** Prompt-lookup speculation for decodes (--spec-max-draft; scheduler/spec-lookup.ts); absent: off. */
  readonly speculation?: SpecOptions;
  /** The disk tier (--kv-disk) under the prefix cache; absent: evicted pages are gone. */
  readonly kvSpill?: KvSpill;
  /** Where the prefix cache publishes its KV events (pages/kv-events.ts); absent: none. */
  readonly kvEvents?: KvEventSink;
}

export function schedulerFor(role: Role, o: SchedulerLimits): Scheduler {
  const { pool, faults, kvSpill, kvEvents } = o;
  const prefixCache = (): CountedPrefixCache => {
    const cache = new CountedPrefixCache({
      pool,
      faults,
      ...(kvSpill === undefined ? {} : { spill: kvSpill }),
      ...(kvEvents === undefined ? {} : { events: kvEvents }),
    });
    setTierSource(pool, 'prefix-cache', () => cache.tiers()); // the dashboard's and /metrics' pool and disk tiers
    return cache;
  };
  return new Scheduler({
    role,
    pool,
    ...(role === 'decode' ? { reserveOutputPages: true } : { prefixCache: prefixCache() }),
    pageSize: pool.pageSize,
    contextLength: o.contextLength,
    maxRunningRequests: o.maxRunningRequests,
    chunkedPrefillSize: o.chunkedPrefillSize,
    maxWaiting: o.maxWaiting,
    faults,
    eosTokenIds: o.eosTokenIds,
    ...(o.speculation === undefined ? {} : { speculation: o.speculation }),
    ...(o.promptLogitRows === undefined ? {} : { promptLogitRows: o.promptLogitRows }),
  });
}
