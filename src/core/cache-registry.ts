// The registry of Tessera's caches: every long-lived store in src/ (a class field or module-level
// Map, WeakMap, Set, WeakSet or *Cache/*Lru/*Memo object, a record or array named like a cache, or a
// class named like a cache), each either a CACHE (it keeps request-derived data across requests:
// then it names how its key includes the tenant's CacheNamespace or the tenant, and the fault
// points that drop it) or STATE (per request, per connection, per worker, static tables: why it is
// not such a cache).
// test/cache-namespace/ scans src/ for such stores and fails on one missing here (and on an entry
// whose store is gone), and probes every cache with two tenants and the same input: tenant B must
// not observe tenant A's entry; with each named fault on, the probe must see B observe it.
// A site is `path:name` (`#name` for a private field, `class Name` for a class).
// Must never: list a cache as state to get a new store past the scan; name a cache without a probe.
import type { FaultName } from './faults.js';

export interface CacheDeclaration {
  /** The probe's name in test/cache-namespace/probes.ts. */
  readonly name: string;
  readonly sites: readonly string[];
  /** How every key of the cache includes the namespace (or the tenant). */
  readonly key: string;
  /** Fault points that drop the namespace from the key: the probe's negative controls. */
  readonly faults: readonly FaultName[];
}

export interface StateDeclaration {
  readonly site: string;
  /** Why the store keeps no request-derived data across requests (or keeps it keyed elsewhere). */
  readonly why: string;
}

export const CACHES: readonly CacheDeclaration[] = [
  {
    name: 'prefix cache',
    sites: [
      'src/pages/prefix-cache.ts:class PrefixCache',
      'src/pages/prefix-tree.ts:#roots',
      'src/pages/prefix-tree.ts:#nodes',
      'src/pages/prefix-cache.ts:#spilled',
      'src/pages/block-hashes.ts:#memos',
      'src/pages/block-hashes.ts:#tags',
      'src/worker/tier-views.ts:class CountedPrefixCache',
    ],
    key: 'the tenant is the root of every path (roots: tenant -> tree); nodes, spilled, memos and tags hang off those trees',
    faults: ['share-prefix-across-tenants'],
  },
  {
    name: 'peer lookup',
    sites: ['src/pages/prefix-tree.ts:#byPath'],
    key: "byPath is keyed by (the tenant's root, path hash): a peer's PrefixFetch finds only its namespace's pages",
    faults: ['prefix-key-without-tenant'],
  },
  {
    name: 'disk tier',
    sites: ['src/worker/disk-tier.ts:#files', 'src/worker/disk-tier.ts:#pending', 'src/worker/disk-tier.ts:#routes'],
    key:
      "file name = hash of (CacheNamespace, path hash); the file's header carries the namespace, checked on load; " +
      '#routes (per file name: its keyed tenant tag and block hash) is reported, never loaded from',
    faults: ['spill-without-namespace'],
  },
  {
    name: 'word cache',
    sites: [
      'src/tokenizer/tokenizer.ts:#wordCaches',
      'src/tokenizer/word-cache.ts:class LruWordCache',
      'src/tokenizer/word-cache.ts:class ScopedWordCaches',
      'src/tokenizer/word-cache.ts:#scopes',
      'src/tokenizer/word-cache.ts:#entries',
    ],
    key: "one LRU per scope, the scope being the request's tenant (TokenizeJob.cacheScope)",
    faults: ['shared-word-cache'],
  },
  {
    name: 'grammar cache',
    sites: [
      'src/grammar/engine.ts:#approved',
      'src/grammar/engine.ts:#checking',
      'src/grammar/grammar-thread-main.ts:cache',
      'src/grammar/matcher-pool.ts:#heavy',
    ],
    key: 'GrammarEngine #keyOf: tenant + NUL + constraintKey(spec), for approvals, checks in flight, compiled grammars, heavy threads',
    faults: ['share-grammar-cache-across-tenants'],
  },
  {
    name: 'router prefix index',
    sites: [],
    key: "each worker's report is tenant tag -> block hashes (router/prefix-index.ts); a request reads only its tenant's tag",
    faults: ['share-prefix-index-across-tenants'],
  },
  {
    name: 'kv events',
    sites: [],
    key: "every event names the tenant's keyed tag and a block hash chained from it (pages/kv-events.ts' ring)",
    faults: ['share-prefix-across-tenants'],
  },
];

export const NOT_CACHES: readonly StateDeclaration[] = [
  { site: 'src/api/openai/batch-runner.ts:#running', why: 'batch lines running now (per line, removed at its end)' },
  { site: 'src/api/openai/batch-runner.ts:#preemptible', why: "the running lines' abort handles (per line)" },
  { site: 'src/api/openai/batch-runner.ts:#preempted', why: 'how often each line gave way (per line, counts)' },
  { site: 'src/api/openai/batch-shapes.ts:FINISHED', why: 'batch statuses (static)' },
  { site: 'src/api/http/http-connections.ts:#all', why: 'open sockets' },
  { site: 'src/api/http/http-connections.ts:#waiting', why: 'sockets between requests' },
  { site: 'src/api/http/http-connections.ts:#waitingBySource', why: 'idle sockets per source address' },
  { site: 'src/api/ops/metrics.ts:#named', why: 'metric names registered (static)' },
  { site: 'src/api/http/rate-limit.ts:#limits', why: "each API key's configured limits (static, per tenant)" },
  { site: 'src/api/http/rate-limit.ts:#meters', why: "a tenant's own request rate meter, keyed by the tenant" },
  { site: 'src/api/openai/responses-shapes.ts:#calls', why: "one response's tool calls (per request)" },
  { site: 'src/api/http/routes.ts:ROUTES', why: 'the route table (static)' },
  { site: 'src/api/http/server.ts:#inFlight', why: 'requests in flight (per request, removed at end)' },
  { site: 'src/batch/store.ts:TERMINAL', why: 'batch statuses (static)' },
  {
    site: 'src/batch/store.ts:#files',
    why:
      "uploaded files by id, each with its tenant; every lookup is the tenant's own (another tenant gets 404): " +
      "a tenant's data, never reused for another request",
  },
  { site: 'src/batch/store.ts:#batches', why: "batches by id, each with its tenant; every lookup is the tenant's own" },
  { site: 'src/core/faults.ts:#active', why: 'armed fault points (static)' },
  { site: 'src/core/cache-registry.ts:CACHES', why: 'this registry (static)' },
  {
    site: 'src/router/cluster-lora.ts:#loaded',
    why: 'hot-loaded adapter names and file digests (admin state, no request data)',
  },
  { site: 'src/core/cache-registry.ts:NOT_CACHES', why: 'this registry (static)' },
  { site: 'src/core/telemetry.ts:#seen', why: 'last totals mirrored into counters (numbers, no request data)' },
  { site: 'src/grammar/grammar-thread-main.ts:matchers', why: "one request's matcher by id, disposed at its end" },
  { site: 'src/grammar/matchers.ts:#creating', why: 'matchers being created, by request id' },
  { site: 'src/grammar/ref-cycles.ts:ANNOTATIONS', why: 'keyword table (static)' },
  { site: 'src/grammar/schema-rules.ts:ANNOTATIONS', why: 'keyword table (static)' },
  { site: 'src/kernels/wasm/runtime.ts:#buffers', why: 'WASM memory buffers' },
  { site: 'src/kernels/wasm/runtime.ts:#scratch', why: 'scratch buffers by kernel shape (no request data kept)' },
  { site: 'src/formats/gguf-reader.ts:SCALAR_BY_CODE', why: 'GGUF type table (static)' },
  { site: 'src/formats/gguf-weights.ts:CONFIG_TENSORS', why: 'tensor name table (static)' },
  {
    site: 'src/engine/lora.ts:#adapters',
    why: "loaded LoRA adapters' weights by name (model, not requests; their KV is keyed by digest: kvTenantOf)",
  },
  {
    site: 'src/engine/lora-rows.ts:transposed',
    why: "each LoRA pair's B transposed for the native kernel, keyed weakly by the pair (adapter weights, no request data)",
  },
  {
    site: 'src/engine/forward/layer-attention.ts:tablesOf',
    why: "scratch: one step's page tables laid end to end, keyed weakly by the activations; rewritten before each step reads it (page ids, no KV)",
  },
  {
    site: 'src/worker/lora-registry.ts:#entries',
    why: 'loaded adapters: name, digest, allowed tenants (admin configuration)',
  },
  { site: 'src/worker/lora-registry.ts:#loading', why: 'adapter names being loaded now' },
  {
    site: 'src/worker/lora-registry.ts:#retiring',
    why: "unloaded adapter names whose weights wait for this node's last request under them",
  },
  {
    site: 'src/worker/lora-registry.ts:#names',
    why: 'adapter digest -> the admin-given name it was last loaded under (KV events), at most 1024',
  },
  { site: 'src/router/workers.ts:#polls', why: "each worker's /health poll under way (at most one per worker)" },
  { site: 'src/formats/tensor-names.ts:fileOf', why: 'tensor name -> weights file (model)' },
  { site: 'src/pages/kv-events.ts:#listeners', why: 'open /kv-events streams (per connection)' },
  { site: 'src/pages/prefix-cache.ts:#pins', why: 'how many open leases pin each page (counts, per lease)' },
  {
    site: 'src/pages/lease.ts:#open',
    why: "a holder's open leases, each ended by done, close or deadline (per fetch)",
  },
  { site: 'src/router/discovery.ts:#current', why: 'worker URLs per DNS target' },
  { site: 'src/router/pd-router.ts:#live', why: 'requests being relayed' },
  { site: 'src/router/pd-router.ts:#byMachine', why: 'request id mapping (per request)' },
  { site: 'src/router/pd-router.ts:#prefillOf', why: "a request's prefill, dropped at its end" },
  {
    site: 'src/router/prefix-routing.ts:#hints',
    why: "a request's chosen prefill and prefix holder, until it is paired (per request)",
  },
  { site: 'src/router/pd-router.ts:#refused', why: 'workers whose join checks failed, and why' },
  { site: 'src/scheduler/book.ts:requests', why: 'requests admitted (per request)' },
  { site: 'src/scheduler/book.ts:quarantined', why: "a request's quarantined pages until AbortAck" },
  { site: 'src/scheduler/fair-share.ts:#counters', why: "each tenant's own service counter, keyed by the tenant" },
  { site: 'src/scheduler/fair-share.ts:#active', why: "each tenant's own running count, keyed by the tenant" },
  { site: 'src/scheduler/queue.ts:#queues', why: "each tenant's own waiting requests" },
  { site: 'src/transfer/decode-landing.ts:#incoming', why: 'chunks landing, per peer (per transfer)' },
  { site: 'src/transfer/decode-machine.ts:#connected', why: 'connected peers' },
  { site: 'src/transfer/prefix-fetch-requester.ts:#open', why: 'open prefix fetches (per fetch, ended or abandoned)' },
  { site: 'src/probe/run.ts:USES_CONTEXT', why: 'checks that size prompts to the context (static)' },
  { site: 'src/transfer/router-machine.ts:RETRYABLE', why: 'error code table (static)' },
  { site: 'src/transfer/router-machine.ts:#clients', why: 'requests being relayed' },
  {
    site: 'src/transfer/machine.ts:active',
    why: "a machine's requests in flight (router attempts, prefill and decode transfers)",
  },
  { site: 'src/transfer/router-machine.ts:#inFlight', why: 'requests in flight per worker (counts)' },
  { site: 'src/transfer/tombstones.ts:#byRid', why: 'recently ended request ids (bounded; ids only)' },
  { site: 'src/transfer/transports/memory.ts:#listeners', why: 'in-memory transport listeners (tests)' },
  { site: 'src/transfer/transports/peer-transport.ts:#byPeer', why: 'connections per peer' },
  { site: 'src/transfer/transports/peer-transport.ts:#evicted', why: 'connections evicted' },
  { site: 'src/transfer/transports/preauth-room.ts:#all', why: 'connections before authentication' },
  { site: 'src/transfer/transports/preauth-room.ts:#bySource', why: 'unauthenticated connections per source' },
  { site: 'src/transfer/transports/refusal-log.ts:#last', why: 'log rate limiting per refusal class' },
  { site: 'src/worker/colocated.ts:#live', why: 'requests being generated' },
  { site: 'src/worker/decode-worker.ts:#decoding', why: 'requests being decoded' },
  { site: 'src/worker/prefill-worker.ts:#jobs', why: 'requests being prefilled' },
  {
    site: 'src/engine/draft-model.ts:#seqs',
    why: "each decoding request's draft-pool page table, by request id: its own KV only, released when it stops decoding",
  },
  {
    site: 'src/worker/prefill-worker.ts:#hints',
    why: "the router's prefix-holder hint of a request, until its admission (bounded)",
  },
  { site: 'src/worker/tier-views.ts:SOURCES', why: "each pool's tier counters (numbers only)" },
];
