// Fault points (failpoints): test-only switches that turn a defence off or inject a fault,
// so every defence has a negative control. They are inert unless the process was started
// with TESSERA_ALLOW_FAULTS=1; src/cli reads the environment and passes a FaultSet down.
// Lower layers receive the set as an argument and never read the environment themselves.

export const FAULT_NAMES = [
  /** Prefill writes only the first page, then reports the whole prompt covered (the incident). */
  'placeholder-done',
  /** Flip one bit in one KV frame after its checksum was computed. */
  'corrupt-chunk',
  /** A node that receives Abort never sends AbortAck. */
  'drop-abort-ack',
  /** Free (not quarantine) pages a peer may still write, without waiting for AbortAck. */
  'free-before-ack',
  /** Skip the tag/stamp checks before reading pages, and the stamp-based coverage check. */
  'skip-page-check',
  /** Skip admission checks (context length, pool fit) before allocating. */
  'skip-admission',
  /** Skip the start-up check that the pool holds the context length. */
  'skip-startup-check',
  /** Accept KV frames without verifying their checksum. */
  'skip-checksum',
  /** Accept KV frames whose destination tags do not match the ledger. */
  'skip-tag-check',
  /** Decode accepts KvDone from a prefill whose model fingerprint is not its own; the router pairs workers whatever their fingerprints. */
  'skip-model-check',
  /** Share prefix-cache entries across tenants. */
  'share-prefix-across-tenants',
  /** The disk tier drops the cache namespace (tenant, model, KV layout) from a spilled page's key and check: tenant B loads tenant A's page. */
  'spill-without-namespace',
  /** The disk tier skips the xxh64 check of a spilled page's bytes on load: a corrupted file is read. */
  'skip-spill-checksum',
  /** The disk tier reports pages whose header was keyed under another cluster secret or model (hashes of a key it does not hold). */
  'report-foreign-disk-pages',
  /** A prefix-store holder takes no lease (no pin) on the pages it serves a peer: eviction may reuse a page mid-read, and its new bytes are sent. */
  'ignore-prefix-lease',
  /** A prefix-store holder looks pages up by path hash alone, without the tenant's namespace: tenant B fetches tenant A's pages. */
  'prefix-key-without-tenant',
  /** Send a stream's 200 and SSE headers before its first token (a later failure cannot get its status). */
  'eager-stream-headers',
  /** The worker hands each item of a batched step its neighbour's logits (a batching bug that leaks one request's output into another's). */
  'swap-batch-rows',
  /** A write into a page lent to the step in flight (a landing crossing into the engine thread's pages) is let through. */
  'skip-lend-check',
  /**
   * The router skips the pool-fit rule: a prompt that fits the context but no worker's pool gets a 200, served
   * truncated to what the pools hold (the incident's "200 instead of 400"). Hooked where that 400 is decided today
   * (router/pd-router.ts, after clusterAdmission); re-home it beside the unified context-length rule.
   */
  'admit-over-pool',
  /** /dashboard answers anyone, admin key or not (the page map shows which tenant owns which page). */
  'open-dashboard',
  /** GET /kv-events answers without the admin key or the cluster secret (anyone reads a node's block hashes). */
  'open-kv-events',
  /** Sample a structured-output request without its token mask (the grammar then refuses what the model picks). */
  'skip-token-mask',
  /** The grammar engine keeps an xgrammar instance that trapped instead of rebuilding it (every later structured request fails). */
  'keep-trapped-grammar',
  /** The grammar engine compiles a schema without first checking its size limits (depth, bytes, properties, patterns, ...). */
  'skip-schema-limits',
  /** The matcher grammar thread exits when asked to compile a schema holding GRAMMAR_CRASH_MARKER (tests the thread's replacement). */
  'crash-grammar-thread',
  /** Every grammar's matchers share one matcher thread: a slow compile holds up every other request's mask. */
  'shared-matcher-thread',
  /** The router pairs a worker, static or joined by DNS, without its join checks (fingerprint, KV layout, cluster secret). */
  'skip-join-check',
  /** The router leaves its connection to a lost host open (attempts on it wait out the protocol's timeouts). */
  'ignore-host-loss',
  /** The router's prefix index matches a request against every tenant's cached blocks, not only its own tenant's. */
  'share-prefix-index-across-tenants',
  /**
   * Prefix block hashes are not keyed with the cluster secret (seeded with the tenant's name, xxh64 links) and a
   * prefill's /health names tenants: whoever reads it recomputes a guessed prompt's hashes and confirms it.
   */
  'unkeyed-prefix-hashes',
  /**
   * The API skips the limits it shares with the wire (core/limits.ts): it accepts top_k >= 2^31, a stop string
   * over 1024 characters, more than 1024 stop_token_ids.
   */
  'skip-request-limits',
  /** A Reserve frame that breaks one request's rules closes the connection other requests share, instead of being Rejected alone. */
  'close-on-bad-reserve',
  /**
   * Cluster listeners take unauthenticated connections without a cap (per node, per source), each with its 1 MiB
   * read buffer at once and a handshake frame up to the 64 MiB frame limit.
   */
  'lift-preauth-limits',
  /** The HTTP listener runs on Node's defaults: no idle timeout, no connection cap, Node's empty 400/431 for framing errors. */
  'skip-http-guard',
  /**
   * HTTP request heads are left to Node's headersTimeout (it starts at the first byte and is checked every 30 s):
   * a socket that sends nothing waits out the idle bound, one that trickles a header line now and then stays open.
   */
  'lax-header-deadline',
  /** At the HTTP connection cap a newcomer is refused (503) instead of the longest-idle connections being closed; no per-source cap. */
  'refuse-at-http-cap',
  /** Authenticated cluster connections count against the pre-auth caps (per node, per source) and may be closed to make room. */
  'evict-authenticated-peers',
  /** At a pre-auth cap a cluster listener refuses the newcomer (a peer dialing from a flooded address) instead of closing the oldest stranger. */
  'refuse-at-preauth-cap',
  /** A text prompt is tokenized whatever its length in bytes (no refusal from its length alone; the body limit is the configured one). */
  'skip-prompt-bound',
  /** The router counts health polls that timed out because its own event loop was stalled (one long router step marks every worker down). */
  'count-stalled-polls',
  /** The router answers an `overloaded` that came before the first token at once (503) instead of queueing the request for room. */
  'no-pd-wait-queue',
  /** The scheduler and the router's wait queue serve tenants first come first served (tenant round-robin by requests), not by their virtual token counters. */
  'no-tenant-fairness',
  /** The step budget splits a short prompt like any other (its first token two to four steps later beside decodes), not whole. */
  'split-short-prompts',
  /** A step without decodes takes a whole chunk (chunkedPrefillSize) even while several tenants share the node, not a budgeted one. */
  'unbounded-shared-steps',
  /** The shared window after two tenants had requests lasts SHARED_WINDOW_STEPS plans only, not also SHARED_WINDOW_MS of steps (w6-fair). */
  'plan-count-shared-window',
  /** Decode reserves pages for the prompt alone, not for the whole output, before the 200 (a started stream may end `overloaded`). */
  'skip-output-reservation',
  /** With API keys, /health tells anyone its detail (a router's workers, their internal addresses and loads), not only the admin key. */
  'open-health',
  /** With API keys, /metrics shows everyone the per-tenant series (tenant names, requests, tokens, queue time, 429s), not only the admin key. */
  'open-tenant-metrics',
  /** A prefill reports the positions its step in flight is still writing as computed (their sends read unfinished slots). */
  'send-in-flight',
  /** The API renders chat templates and tokenizes prompts on the main thread (a long prompt stalls HTTP, SSE and /health). */
  'inline-tokenize',
  /** A tokenizer thread exits when it is asked to tokenize text holding TOKENIZER_CRASH_MARKER (its restart and the 500 it leaves). */
  'crash-tokenizer-thread',
  /** Chat prompts are encoded as one text: special-token strings in user content become the special tokens (role injection). */
  'parse-special-in-content',
  /** The tokenizer threads take waiting prompts in arrival order with no wait bound (a 17K prompt waits behind every huge one before it). */
  'fifo-tokenizer-queue',
  /** Every prompt's encode reads and fills one tokenizer word cache, whatever its tenant (B's timing tells which words A sent). */
  'shared-word-cache',
  /**
   * The grammar engine keys approved schemas and compiled grammars by the schema alone, not (tenant, schema): B's
   * request with a schema A sent skips both compiles.
   */
  'share-grammar-cache-across-tenants',
  /** Decode takes a KvChunk whatever KV dtype it says it carries (only the byte count then stands between layouts). */
  'skip-kv-dtype-check',
  /** A schema goes to xgrammar as sent, without Tessera's schema pass (its number, length, format, pattern and enum rules; its 400s). */
  'skip-schema-rules',
  /**
   * Speculative decoding leaves the stamps of rejected draft positions as the verification step wrote them (no
   * rollback): a read past the accepted end then passes the page checks and attends to a rejected token's K/V.
   */
  'keep-rejected-stamps',
  /** A prompt's own log-probabilities are read one logits row late (token p's from the row after p, not before). */
  'shift-prompt-logprobs',
  /** A step that gives another tenant's short prompt its first token fills with long prompts' chunks to the step budget. */
  'crowded-first-token-step',
  /** The Batch API keeps each line's answer in memory only, not in its write-ahead log: after a crash, answered lines run again. */
  'batch-answers-in-memory',
  /** The Batch API's store finds a file or batch by its id alone, not the asking tenant's: another tenant's upload, batch and results can be read. */
  'batch-ignore-tenant',
  /** A request's LoRA adapter is left out of its KV namespace: a prompt cached under adapter A (or the base model) is reused under adapter B. */
  'lora-drop-from-key',
  /**
   * Speculative decoding with a draft model: the draft model's own pool keeps the stamps of positions the target
   * rejected (no rollback there). Negative control of the draft pool's integrity check (engine/draft-model.ts).
   */
  'keep-draft-model-stamps',
  /** The grammar matcher keeps the drafts it accepted for a speculative step's masks instead of rolling them back. */
  'skip-grammar-rollback',
  /**
   * While several tenants share a co-located node, its steps keep the usual step budget (twice their decodes' time, at
   * least 20 ms, a first chunk of at least 16 tokens' time), not the shared one (1.5x, at least 10 ms, 4 tokens' time):
   * another tenant's newcomer waits out a longer step in flight.
   */
  'loose-shared-budget',
  /**
   * A tenant's waiting head that the step budget leaves no time for (a long prompt, at a smaller
   * virtual token counter) stops every start in the step: another tenant's short prompt, which
   * the budget does not split, waits steps behind it instead of riding this one.
   */
  'budget-closes-admission',
  /**
   * The keys file's per-key limits are not checked: a key past its requests or tokens per minute,
   * or its concurrent requests, is served, never answered 429 (the per-tenant counts still run).
   */
  'skip-key-limits',
  /** The router's hot load of a LoRA adapter that one worker refused is not rolled back: the workers that loaded it keep it. */
  'lora-no-rollback',
  /** A PD worker's unload of a LoRA adapter drops its weights while its own requests still run with it (no deferral). */
  'lora-unload-in-use',
  /** A GGUF's weights map is mapped writable (copy-on-write) instead of read-only: a stray write changes the weights in use instead of faulting. */
  'writable-weights-map',
  /** `serve` / `up` start without checking that weights, KV pool and activations fit the machine's memory (`tessera plan`'s memory rows). */
  'skip-memory-check',
  /**
   * Not a defence's switch but a test's lever: a request whose seed is i emits TESSERA_FORCED_TOKENS' sequence i, one id
   * per step in place of the sampled one (then samples again), as llama-server's one-string grammar forces its output:
   * the reasoning parsers' agreement test with llama-server (test/llama-cpp/harmony-llama-server.test.ts).
   */
  'forced-answer',
] as const;

export type FaultName = (typeof FAULT_NAMES)[number];

export function isFaultName(name: string): name is FaultName {
  return (FAULT_NAMES as readonly string[]).includes(name);
}

/** An immutable set of active fault points. `NO_FAULTS` in production. */
export class FaultSet {
  readonly #active: ReadonlySet<FaultName>;
  /** `forced-answer`'s sequences, by seed. */
  readonly #forced: readonly (readonly number[])[];

  constructor(active: Iterable<FaultName> = [], forced: readonly (readonly number[])[] = []) {
    this.#active = new Set(active);
    this.#forced = forced;
  }

  /** Under `forced-answer`: the id a request with `seed` emits as its output token `index`; undefined: sample it. */
  forcedToken(seed: number, index: number): number | undefined {
    if (!this.#active.has('forced-answer')) return undefined;
    return this.#forced[seed]?.[index];
  }

  has(name: FaultName): boolean {
    return this.#active.has(name);
  }

  get size(): number {
    return this.#active.size;
  }

  names(): FaultName[] {
    return [...this.#active].sort();
  }
}

export const NO_FAULTS = new FaultSet();
