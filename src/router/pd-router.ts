// PdRouter: the back end `tessera router` hands to the HTTP front end (src/api's Backend,
// structurally): it pairs a prefill and a decode for every request and relays it through the
// RouterMachine over authenticated TCP connections to the workers.
//
// Life of a client request here (the front end already tokenized it and checked the router's
// context length):
//   1. cluster admission (pair-policy.ts): no pair could ever hold it -> 400, before any Reserve
//   2. submit -> RouterMachine: Reserve -> decode, Prefill -> prefill (the pair picked by load)
//   3. Tokens -> ClientStream: text and stop strings here; a stop string ends the client's
//      stream as finished ('stop') and aborts the rest through the protocol
//   4. the machine's one outcome: finished with usage, or the honest error; an `overloaded`
//      one before any token (no slot or pages on either side) waits in the WaitQueue and is
//      submitted again, under a new machine rid, as others end (or fails once its wait is over);
//      while every prefill or every decode is down, none waits: no room comes back by waiting
//   The client's AbortSignal, or its reader leaving, becomes `clientGone`: a protocol Abort,
//   acknowledged by decode, never a cut connection.
// Must never: answer a request without the machine (except cluster admission), cut a worker's
// connection for a client, or turn a failed attempt into a success.
import { hostname } from 'node:os';
import {
  AbortedError,
  assertNever,
  TesseraError,
  type BackendHealth,
  type BackendStats,
  type AdapterDirectory,
  type ClusterPageMap,
  type FaultSet,
  type GenerateEvent,
  type GenerateRequest,
  type PageCounts,
  type PdMetricsSink,
  type RequestId,
  type TextStream,
} from '../core/index.js';
import {
  MachineDriver,
  NO_TRACE,
  probeClusterSecret,
  RouterMachine,
  submissionRid,
  TcpTransport,
  type RouterEffect,
  type RouterInput,
  type Timeouts,
  type TraceSink,
  type Transport,
  type PeerId,
} from '../transfer/index.js';
import { PrefixHasher } from '../pages/index.js';
import { ClientStream } from './client-stream.js';
import { clusterPageMap } from './cluster-map.js';
import { clusterAdmission, type PolicyChecks, type WorkerView } from './pair-policy.js';
import { RouterMetrics } from './router-metrics.js';
import { DEFAULT_WAIT_QUEUE, WaitQueue, type WaitQueueOptions } from './wait-queue.js';
import { WorkerRegistry } from './workers.js';
import { PrefixRouting, type RoutingPolicy } from './prefix-routing.js';
import { Discovery, joinCheck, systemResolveA, type DnsTarget, type ResolveA } from './discovery.js';

export interface PdRouterOptions {
  readonly modelName: string;
  readonly root: string;
  /** Prompt + max_tokens above it: 400 from the front end. Each worker re-checks its own. */
  readonly contextLength: number;
  /** The workers' HTTP URLs (their /health tells the router their cluster address and limits). */
  readonly prefills: readonly string[];
  readonly decodes: readonly string[];
  readonly clusterSecret: string;
  /** The router's name on the cluster network; default router-<host>-<pid>. */
  readonly nodeId?: string;
  /** A text stream (detokenizer + stop strings) for one request's output. */
  readonly textStream: (promptTokens: readonly number[], stops: readonly string[]) => TextStream;
  readonly maxAttempts?: number;
  readonly timeouts?: Partial<Timeouts>;
  readonly trace?: TraceSink;
  /** Who writes rid's pages (the Reserve's prefill): for trace files (the checker's writerOf). */
  readonly onWriter?: (rid: string, prefill: string) => void;
  readonly faults: FaultSet;
  readonly pollIntervalMs?: number;
  readonly fetchTimeoutMs?: number;
  /** Requests the cluster has no room for yet wait here (default DEFAULT_WAIT_QUEUE). */
  readonly waitQueue?: WaitQueueOptions;
  /** The admin key the router shows its workers' page maps with (/dashboard); null: off. Default null. */
  readonly adminKey?: string | null;
  /** `prefix` (default): the prefill with the longest cached prefix for the tenant, within the load bound; `load`: least loaded. */
  readonly routing?: RoutingPolicy;
  /** Where the router says what it saw (a worker's host lost, workers joining and leaving). */
  readonly log?: (line: string) => void;
  /** Workers named by DNS (re-resolved every intervalMs; default resolver: the system's). */
  /**
   * The LoRA adapters clients may name (`model`: `<served>:NAME` or `NAME`), each with its digest
   * and tenants: the CLI builds it from --lora, the same flags as the workers'. Every Reserve and
   * Prefill names the request's adapter with that digest; a worker without it refuses.
   */
  readonly adapters?: AdapterDirectory;
  readonly dns?: {
    readonly targets: readonly DnsTarget[];
    readonly intervalMs: number;
    readonly resolve?: ResolveA;
    readonly log?: (line: string) => void;
  };
}

/** One client request while it lives: its stream, the machine rid of its current submission. */
interface Live {
  readonly request: GenerateRequest;
  readonly stream: ClientStream;
  machineRid: RequestId;
  /** Submissions so far (the first under the client's rid, then `<rid>~w<n>`: transfer/request-ids.ts). */
  submissions: number;
  /** When it first had to wait, until its first token. */
  waitingSinceMs: number | undefined;
  /** Its place in the order clients sent requests (the WaitQueue keeps it). */
  readonly arrival: number;
  queued: boolean;
  /** Its current submission came from the WaitQueue's take() (a refusal gives that charge back). */
  taken: boolean;
  detach: () => void;
}

/** How often waiting requests are tried again when nothing ends (pages freed by aborts, health updates). */
const WAIT_RETRY_MS = 100;

export class PdRouter {
  readonly modelName: string;
  readonly root: string;
  readonly contextLength: number;
  readonly nodeId: string;
  readonly adapters: AdapterDirectory | undefined;
  readonly registry: WorkerRegistry;
  readonly machine: RouterMachine;
  readonly #o: PdRouterOptions;
  readonly #transport: Transport;
  readonly #driver: MachineDriver<RouterInput, RouterEffect>;
  readonly #metrics: RouterMetrics;
  /** The pair policy's checks: all, but for the test-only fault points skip-admission and skip-model-check. */
  readonly #checks: PolicyChecks;
  /** By the client's rid. */
  readonly #live = new Map<RequestId, Live>();
  /** Machine rid -> client rid. */
  readonly #byMachine = new Map<RequestId, RequestId>();
  readonly #queue: WaitQueue<Live>;
  readonly #queueStats = { waited: 0, timedOut: 0 };
  /** Client requests numbered as they come (Live.arrival). */
  #numArrived = 0;
  #queueTimer: NodeJS.Timeout | undefined;
  readonly #discovery: Discovery | undefined;
  readonly #routing: PrefixRouting;
  /** Machine rid -> the prefill of its latest attempt: polled again when the request ends, so its cache report is fresh for the next turn. */
  readonly #prefillOf = new Map<string, PeerId>();
  #closed = false;
  /** Workers whose join checks failed, and why (logged once per reason). */
  readonly #refused = new Map<string, string>();

  constructor(options: PdRouterOptions) {
    this.#o = options;
    this.modelName = options.modelName;
    this.root = options.root;
    this.contextLength = options.contextLength;
    this.nodeId = options.nodeId ?? `router-${hostname()}-${process.pid}`;
    this.adapters = options.adapters;
    this.registry = new WorkerRegistry({
      prefills: options.prefills,
      decodes: options.decodes,
      pollIntervalMs: options.pollIntervalMs ?? 1000,
      fetchTimeoutMs: options.fetchTimeoutMs ?? 2000,
      faults: options.faults,
      inFlightOn: (address) => this.machine.inFlightOn(address),
      // Every worker, given by URL or found by DNS, is paired only once these pass (test-only: skip-join-check).
      vet: async (entry, admitted) => {
        if (options.faults.has('skip-join-check')) return undefined;
        const why =
          joinCheck(entry, admitted, !options.faults.has('skip-model-check')) ??
          (await probeClusterSecret(
            entry.address as string,
            `${this.nodeId}-probe`,
            options.clusterSecret,
            options.fetchTimeoutMs ?? 2000,
          ));
        if (why !== this.#refused.get(entry.url)) {
          if (why !== undefined) this.#o.log?.(`${entry.role} ${entry.url} not admitted (never paired): ${why}`);
          else if (this.#refused.has(entry.url))
            this.#o.log?.(`${entry.role} ${entry.url} admitted: its checks pass now`);
        }
        if (why === undefined) this.#refused.delete(entry.url);
        else this.#refused.set(entry.url, why);
        return why;
      },
      // A stalled worker (SIGSTOP, a wedged host, a host whose link is down) holds its requests
      // until a 600 s timeout otherwise: once it is marked down (within MAX_SLOW_POLLS polls,
      // about 3-5 s by default) its connection is closed, so requests before their first token
      // retry on another pair and the rest fail at once with the reason.
      onDown: (entry) => this.#onDown(entry.address, entry.lastError),
      onRemoved: (entry) => {
        if (entry.address !== undefined && this.registry.byAddress(entry.address) === undefined)
          this.#transport.closePeer(entry.address, 'the worker left the cluster');
      },
    });
    const dns = options.dns;
    this.#discovery =
      dns === undefined || dns.targets.length === 0
        ? undefined
        : new Discovery({
            targets: dns.targets,
            intervalMs: dns.intervalMs,
            registry: this.registry,
            resolve: dns.resolve ?? systemResolveA(options.fetchTimeoutMs ?? 2000),
            log: dns.log ?? options.log ?? (() => undefined),
          });
    this.#metrics = new RouterMetrics(this.registry);
    // Fair between tenants (wait-queue.ts); `no-tenant-fairness` (test-only): arrival order.
    this.#queue = new WaitQueue<Live>(
      options.waitQueue ?? DEFAULT_WAIT_QUEUE,
      options.faults.has('no-tenant-fairness')
        ? undefined
        : { tenantOf: (live) => live.request.tenant, tokensOf: (live) => live.request.promptTokens.length },
    );
    const checks: PolicyChecks = {
      admission: !options.faults.has('skip-admission'),
      model: !options.faults.has('skip-model-check'),
    };
    this.#checks = checks;
    this.#routing = new PrefixRouting(
      this.registry,
      checks,
      options.routing ?? 'prefix',
      new PrefixHasher(options.clusterSecret, options.faults.has('unkeyed-prefix-hashes')),
      options.faults.has('share-prefix-index-across-tenants'),
      options.faults.has('lora-drop-from-key'),
    );
    this.machine = new RouterMachine({
      node: this.nodeId,
      contextLength: options.contextLength,
      pickPair: (request, avoid) => this.#routing.pick(request, avoid),
      trace: options.trace ?? NO_TRACE,
      ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
      ...(options.timeouts === undefined ? {} : { timeouts: options.timeouts }),
    });
    this.#driver = new MachineDriver<RouterInput, RouterEffect>(this.machine, (effect) => this.#carryOut(effect));
    const handlers = this.#driver.handlers();
    this.#transport = TcpTransport.client({
      nodeId: this.nodeId,
      secret: options.clusterSecret,
      dial: true,
      handlers: {
        connected: handlers.connected,
        message: handlers.message,
        closed: (peer, reason) => {
          handlers.closed(peer, reason);
          this.registry.recheck(peer);
        },
      },
    });
  }

  /** First poll of every worker (resolves when each answered or failed), then keeps polling. */
  async start(): Promise<void> {
    await this.registry.start();
    await this.#discovery?.start();
  }

  /** The routing counts and each prefill's reported hit rate (prefix-routing.ts). */
  routingReport(): ReturnType<PrefixRouting['report']> {
    return this.#routing.report();
  }

  attachMetrics(sink: PdMetricsSink): void {
    this.#metrics.attach(sink);
  }

  generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
    const { rid } = request;
    const stream = new ClientStream(
      this.#o.textStream(request.promptTokens, request.sampling.stop),
      request.promptTokens.length,
      () => this.#gone(rid),
    );
    let refusal = this.#closed
      ? new TesseraError('overloaded', 'The router is shutting down.')
      : this.#o.faults.has('skip-admission')
        ? undefined
        : clusterAdmission(
            request.promptTokens.length,
            request.sampling.maxTokens,
            this.#views(),
            this.#checks,
            request.adapter,
          );
    let tokens = request.promptTokens;
    if (refusal?.code === 'pool_too_small' && this.#o.faults.has('admit-over-pool')) {
      // Test-only (see FAULT_NAMES): keep the head of the prompt that the smallest pool holds beside max_tokens.
      const poolTokens = Math.min(
        ...this.#views().flatMap((v) => (v.limits === undefined ? [] : [v.limits.numPages * v.limits.pageSize])),
      );
      tokens = tokens.slice(0, Math.max(1, poolTokens - request.sampling.maxTokens));
      refusal = undefined;
    }
    if (refusal !== undefined) {
      stream.failed(refusal);
      return stream;
    }
    // The listener goes when the request ends: a signal shared by n choices must not collect them.
    const onAbort = (): void => this.#gone(rid);
    signal.addEventListener('abort', onAbort, { once: true });
    const live: Live = {
      request: { ...request, promptTokens: tokens },
      stream,
      machineRid: rid,
      submissions: 0,
      waitingSinceMs: undefined,
      arrival: this.#numArrived++,
      queued: false,
      taken: false,
      detach: () => signal.removeEventListener('abort', onAbort),
    };
    this.#live.set(rid, live);
    // Those already waiting go first.
    if (this.#queue.size > 0)
      this.#wait(live, new TesseraError('overloaded', 'requests are waiting for room on the cluster'));
    else this.#submit(live, false);
    if (signal.aborted) this.#gone(rid);
    return stream;
  }

  async health(): Promise<BackendHealth> {
    return {
      healthy: !this.#closed && this.registry.ready,
      detail: {
        role: 'router',
        model: this.modelName,
        node: this.nodeId,
        contextLength: this.contextLength,
        workers: this.registry.entries.map((e) => ({
          url: e.url,
          role: e.role,
          state: e.state,
          source: e.source,
          draining: e.draining,
          address: e.address ?? null,
          modelFingerprint: e.limits?.model ?? null,
          inFlight: this.registry.inFlight(e),
          pages: e.pages ?? null,
          ...(e.lastError === undefined ? {} : { error: e.lastError }),
        })),
        requests: { live: this.#live.size, attempts: this.machine.attemptsByState() },
        queue: {
          waiting: this.#queue.size,
          ...this.#queueStats,
          maxWaiting: this.#queue.options.maxWaiting,
          maxWaitMs: this.#queue.options.maxWaitMs,
        },
        idle: this.#live.size === 0 && this.machine.numActive === 0,
        stats: this.machine.stats(),
        routing: this.#routing.report(),
        ...(this.#discovery === undefined ? {} : { discovery: this.#discovery.stats() }),
        transport: this.#transport.stats(),
      },
    };
  }

  /** At scrape time: a fresh look at every worker (bounded by fetchTimeoutMs), summed. */
  async stats(): Promise<BackendStats> {
    await this.registry.pollAll();
    this.#metrics.sync(this.machine.stats());
    const kvPages = { free: 0, allocated: 0, cached: 0, quarantined: 0 };
    let tagMismatchesTotal = 0;
    for (const e of this.registry.entries) {
      for (const state of Object.keys(kvPages) as (keyof PageCounts)[]) kvPages[state] += e.pages?.[state] ?? 0;
      tagMismatchesTotal += e.totals.tagMismatches;
    }
    const byState = this.machine.attemptsByState();
    return {
      kvPages,
      requestsRunning: (byState['Prefilling'] ?? 0) + (byState['Streaming'] ?? 0),
      requestsWaiting: byState['Reserving'] ?? 0,
      tagMismatchesTotal,
    };
  }

  /** The operator's cluster map (admin-only /dashboard): each worker's own map, and the pairs in flight. */
  pageMap(): Promise<ClusterPageMap> {
    return clusterPageMap({
      node: this.nodeId,
      workers: this.registry.entries,
      pairs: this.machine.inFlight(),
      adminKey: this.#o.adminKey ?? null,
      timeoutMs: this.#o.fetchTimeoutMs ?? 2000,
    });
  }

  /** Refuses new requests, waits up to drainMs for aborts to be acknowledged, then closes every connection. */
  async close(drainMs: number): Promise<void> {
    this.#closed = true;
    for (const rid of [...this.#live.keys()]) this.#gone(rid);
    const until = Date.now() + drainMs;
    while (this.machine.numActive > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    this.#driver.stop();
    clearTimeout(this.#queueTimer);
    this.#discovery?.stop();
    this.registry.stop();
    await this.#transport.close();
  }

  #views(): WorkerView[] {
    return this.registry.views();
  }

  /** A worker was marked down: close its connection (unless the test-only ignore-host-loss), so attempts on it end now. */
  #onDown(address: string | undefined, why: string | undefined): void {
    if (address === undefined || this.#o.faults.has('ignore-host-loss') || !this.#transport.isConnected(address))
      return;
    this.#o.log?.(`${address} marked down (${why ?? 'no answer'}): closing its connection`);
    this.#transport.closePeer(address, `the router marked ${address} down (${why ?? 'no answer'})`);
  }

  /** Live client requests running with the adapter `name` (the admin's unload waits for none). */
  adapterInUse(name: string): number {
    let n = 0;
    for (const live of this.#live.values()) if (live.request.adapter?.name === name) n++;
    return n;
  }

  /** The client left (or a stop string ended its stream): end the stream, abort the rest through the protocol. */
  #gone(rid: RequestId): void {
    const live = this.#live.get(rid);
    if (live === undefined) return;
    this.#end(live);
    this.#prefillOf.delete(live.machineRid);
    live.stream.failed(new AbortedError('the client disconnected'));
    if (live.queued) this.#queue.remove((w) => w === live);
    else this.#driver.handle({ kind: 'clientGone', rid: live.machineRid });
  }

  #end(live: Live): void {
    this.#live.delete(live.request.rid);
    this.#byMachine.delete(live.machineRid);
    live.detach();
  }

  /** `taken`: from the WaitQueue (a refusal of this submission gives its charge back). */
  #submit(live: Live, taken: boolean): void {
    const { rid, tenant, promptTokens, sampling, adapter } = live.request;
    live.machineRid = submissionRid(rid, live.submissions);
    live.submissions++;
    live.queued = false;
    live.taken = taken;
    this.#byMachine.set(live.machineRid, rid);
    this.#driver.handle({
      kind: 'submit',
      request: {
        rid: live.machineRid,
        tenant,
        tokens: promptTokens,
        sampling,
        ...(adapter === undefined ? {} : { adapter }),
      },
    });
  }

  /** No room now: wait (in its place by arrival, a retried one too), or fail when the queue is full or the wait over. */
  #wait(live: Live, why: TesseraError): void {
    const now = Date.now();
    const since = live.waitingSinceMs ?? now;
    // No room will come back while every worker of a role is down: say so now, not after maxWaitMs.
    const unavailable = this.registry.unavailable();
    if (live.waitingSinceMs === undefined && unavailable === undefined) this.#queueStats.waited++;
    live.waitingSinceMs = since;
    const queues = !this.#o.faults.has('no-pd-wait-queue'); // test-only: the 503 at once of before the queue
    if (
      unavailable === undefined &&
      queues &&
      !this.#closed &&
      this.#queue.park(live, live.arrival, since, now, live.taken)
    ) {
      live.queued = true;
      this.#queueTimer ??= setTimeout(() => this.#onQueueTimer(), WAIT_RETRY_MS);
      return;
    }
    this.#end(live);
    const waited = now - since;
    const message = unavailable === undefined ? why.message : `${unavailable}; not queued`;
    const detail = `(waited ${waited} ms; ${this.#queue.size} requests waiting)`;
    live.stream.failed(new TesseraError('overloaded', `${message} ${detail}`));
  }

  /** Room may have come back: the longest-waiting request tries again. */
  #admitNext(): void {
    const next = this.#queue.take();
    if (next === undefined) return;
    this.#submit(next.item, true);
  }

  #onQueueTimer(): void {
    this.#queueTimer = undefined;
    const unavailable = this.registry.unavailable();
    if (unavailable !== undefined) {
      for (const { item, sinceMs } of this.#queue.remove(() => true)) {
        this.#end(item);
        item.stream.failed(new TesseraError('overloaded', `${unavailable}; waited ${Date.now() - sinceMs} ms`));
      }
    }
    for (const { item } of this.#queue.expired(Date.now())) {
      this.#queueStats.timedOut++;
      this.#end(item);
      item.stream.failed(
        new TesseraError('overloaded', `no room on the cluster within ${this.#queue.options.maxWaitMs} ms`),
      );
    }
    this.#admitNext();
    if (this.#queue.size > 0 && !this.#closed) this.#queueTimer = setTimeout(() => this.#onQueueTimer(), WAIT_RETRY_MS);
  }

  /** The live request whose current submission is machine rid `rid`. */
  #liveOf(rid: RequestId): Live | undefined {
    const client = this.#byMachine.get(rid);
    const live = client === undefined ? undefined : this.#live.get(client);
    return live?.machineRid === rid ? live : undefined;
  }

  #carryOut(effect: RouterEffect): void {
    switch (effect.kind) {
      case 'send':
        if (effect.message.type === 'Reserve') this.#o.onWriter?.(effect.message.rid, effect.message.prefillAddress);
        if (effect.message.type === 'Prefill') {
          // The machine says which submission this attempt is of (a retry's rid is not the submission's).
          const submission = this.machine.clientOf(effect.message.rid);
          if (submission !== undefined) this.#prefillOf.set(submission, effect.to);
          // The holder of the prompt's prefix, when the load bound sent it elsewhere: fetch, not recompute.
          const holder = submission === undefined ? undefined : this.#routing.takeHint(submission, effect.to);
          if (holder !== undefined) {
            this.#transport.send(effect.to, { ...effect.message, prefixHolder: holder });
            return;
          }
        }
        this.#transport.send(effect.to, effect.message);
        return;
      case 'closePeer':
        this.#transport.closePeer(effect.peer, effect.reason);
        return;
      case 'clientTokens': {
        const live = this.#liveOf(effect.rid);
        if (live === undefined) return;
        if (live.waitingSinceMs !== undefined) this.#metrics.queueWaited((Date.now() - live.waitingSinceMs) / 1000);
        live.waitingSinceMs = undefined;
        if (effect.promptLogprobs !== undefined) live.stream.promptLogprobs(effect.promptLogprobs);
        if (live.stream.tokens(effect.ids, effect.logprobs) === 'stop') this.#gone(live.request.rid); // the rest is aborted, acknowledged
        return;
      }
      case 'transferTimed':
        this.#metrics.transferTimed(effect.ms);
        return;
      case 'clientOutcome': {
        const prefill = this.#prefillOf.get(effect.rid);
        this.#prefillOf.delete(effect.rid);
        if (prefill !== undefined) this.registry.recheck(prefill);
        const live = this.#liveOf(effect.rid);
        this.#byMachine.delete(effect.rid);
        if (live === undefined) return this.#admitNext(); // the client left; its slot and pages came back
        const { outcome } = effect;
        if (!outcome.ok && outcome.error.code === 'overloaded' && live.stream.numTokens === 0)
          return this.#wait(live, outcome.error);
        this.#end(live);
        if (outcome.ok) live.stream.finished(outcome.finishReason, outcome.cachedTokens ?? 0);
        else live.stream.failed(outcome.error);
        this.#admitNext();
        return;
      }
      default:
        return assertNever(effect, 'router effect');
    }
  }
}
