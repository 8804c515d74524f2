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
//   4. the machine's one outcome: finished with usage, or the honest error
//   The client's AbortSignal, or its reader leaving, becomes `clientGone`: a protocol Abort,
//   acknowledged by decode, never a cut connection.
// Must never: answer a request without the machine (except cluster admission), cut a worker's
// connection for a client, or turn a failed attempt into a success.
import { hostname } from 'node:os';
import { AbortedError, assertNever, TesseraError, type FaultSet, type GenerateEvent, type GenerateRequest, type RequestId } from '../core/index.js';
import type { PageCounts } from '../pages/index.js';
import {
  MachineDriver,
  NO_TRACE,
  RouterMachine,
  TcpTransport,
  type RouterEffect,
  type RouterInput,
  type Timeouts,
  type TraceSink,
  type Transport,
} from '../transfer/index.js';
import { ClientStream, type RouterText } from './client-stream.js';
import { clusterAdmission, pickPair, type PolicyChecks } from './pair-policy.js';
import { RouterLoad, type RouterMetricsSink } from './router-load.js';
import { WorkerRegistry } from './workers.js';

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
  readonly textStream: (promptTokens: readonly number[], stops: readonly string[]) => RouterText;
  readonly maxAttempts?: number;
  readonly timeouts?: Partial<Timeouts>;
  readonly trace?: TraceSink;
  /** Who writes rid's pages (the Reserve's prefill): for trace files (the checker's writerOf). */
  readonly onWriter?: (rid: string, prefill: string) => void;
  readonly faults: FaultSet;
  readonly pollIntervalMs?: number;
  readonly fetchTimeoutMs?: number;
}

/** src/api's BackendHealth/BackendStats, structurally. */
export interface RouterHealth {
  readonly healthy: boolean;
  readonly detail: Readonly<Record<string, unknown>>;
}
export interface RouterBackendStats {
  readonly kvPages: Readonly<PageCounts>;
  readonly requestsRunning: number;
  readonly requestsWaiting: number;
  readonly tagMismatchesTotal: number;
}

export class PdRouter {
  readonly modelName: string;
  readonly root: string;
  readonly contextLength: number;
  readonly nodeId: string;
  readonly registry: WorkerRegistry;
  readonly machine: RouterMachine;
  readonly #o: PdRouterOptions;
  readonly #transport: Transport;
  readonly #driver: MachineDriver<RouterInput, RouterEffect>;
  readonly #load: RouterLoad;
  /** The pair policy's checks: all, but for the test-only fault points skip-admission and skip-model-check. */
  readonly #checks: PolicyChecks;
  readonly #live = new Map<RequestId, ClientStream>();
  #closed = false;

  constructor(options: PdRouterOptions) {
    this.#o = options;
    this.modelName = options.modelName;
    this.root = options.root;
    this.contextLength = options.contextLength;
    this.nodeId = options.nodeId ?? `router-${hostname()}-${process.pid}`;
    this.registry = new WorkerRegistry({
      prefills: options.prefills,
      decodes: options.decodes,
      pollIntervalMs: options.pollIntervalMs ?? 1000,
      fetchTimeoutMs: options.fetchTimeoutMs ?? 2000,
    });
    this.#load = new RouterLoad(this.registry);
    const checks: PolicyChecks = { admission: !options.faults.has('skip-admission'), model: !options.faults.has('skip-model-check') };
    this.#checks = checks;
    const trace = this.#load.tee(options.trace ?? NO_TRACE);
    this.machine = new RouterMachine({
      node: this.nodeId,
      contextLength: options.contextLength,
      pickPair: (request, avoid) => pickPair(request, avoid, this.registry.views(), checks),
      trace,
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
  start(): Promise<void> {
    return this.registry.start();
  }

  attachMetrics(sink: RouterMetricsSink): void {
    this.#load.attachMetrics(sink);
  }

  generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
    const { rid } = request;
    const stream = new ClientStream(this.#o.textStream(request.promptTokens, request.sampling.stop), request.promptTokens.length, () => this.#gone(rid));
    const refusal = this.#closed
      ? new TesseraError('overloaded', 'The router is shutting down.')
      : this.#o.faults.has('skip-admission')
        ? undefined
        : clusterAdmission(request.promptTokens.length, request.sampling.maxTokens, this.registry.views(), this.#checks);
    if (refusal !== undefined) {
      stream.failed(refusal);
      return stream;
    }
    this.#live.set(rid, stream);
    signal.addEventListener('abort', () => this.#gone(rid), { once: true });
    this.#driver.handle({ kind: 'submit', request: { rid, tenant: request.tenant, tokens: request.promptTokens, sampling: request.sampling } });
    if (signal.aborted) this.#gone(rid);
    return stream;
  }

  async health(): Promise<RouterHealth> {
    return {
      healthy: !this.#closed && this.registry.ready,
      detail: {
        role: 'router',
        model: this.modelName,
        node: this.nodeId,
        contextLength: this.contextLength,
        workers: this.registry.entries.map((e) => ({ url: e.url, role: e.role, state: e.state, address: e.address ?? null, modelFingerprint: e.limits?.model ?? null, inFlight: e.inFlight, pages: e.pages ?? null, ...(e.lastError === undefined ? {} : { error: e.lastError }) })),
        requests: { live: this.#live.size, attempts: this.#load.attemptsByState() },
        idle: this.#live.size === 0 && this.machine.numActive === 0,
        stats: this.machine.stats(),
        transport: this.#transport.stats(),
      },
    };
  }

  /** At scrape time: a fresh look at every worker (bounded by fetchTimeoutMs), summed. */
  async stats(): Promise<RouterBackendStats> {
    await this.registry.pollAll();
    this.#load.syncMetrics(this.machine.stats());
    const kvPages = { free: 0, allocated: 0, cached: 0, quarantined: 0 };
    let tagMismatchesTotal = 0;
    for (const e of this.registry.entries) {
      for (const state of Object.keys(kvPages) as (keyof PageCounts)[]) kvPages[state] += e.pages?.[state] ?? 0;
      tagMismatchesTotal += e.totals.tagMismatches;
    }
    const byState = this.#load.attemptsByState();
    return { kvPages, requestsRunning: (byState['Prefilling'] ?? 0) + (byState['Streaming'] ?? 0), requestsWaiting: byState['Reserving'] ?? 0, tagMismatchesTotal };
  }

  /** Refuses new requests, waits up to drainMs for aborts to be acknowledged, then closes every connection. */
  async close(drainMs: number): Promise<void> {
    this.#closed = true;
    for (const rid of [...this.#live.keys()]) this.#gone(rid);
    const until = Date.now() + drainMs;
    while (this.machine.numActive > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    this.#driver.stop();
    this.registry.stop();
    await this.#transport.close();
  }

  /** The client left (or a stop string ended its stream): end the stream, abort the rest through the protocol. */
  #gone(rid: RequestId): void {
    this.#live.get(rid)?.failed(new AbortedError('the client disconnected'));
    this.#live.delete(rid);
    this.#driver.handle({ kind: 'clientGone', rid });
  }

  #carryOut(effect: RouterEffect): void {
    switch (effect.kind) {
      case 'send':
        this.#load.onSend(effect.to, effect.message);
        if (effect.message.type === 'Reserve') this.#o.onWriter?.(effect.message.rid, effect.message.prefillAddress);
        this.#transport.send(effect.to, effect.message);
        return;
      case 'closePeer':
        this.#transport.closePeer(effect.peer, effect.reason);
        return;
      case 'clientTokens': {
        this.#load.onFirstTokens(effect.rid);
        const stream = this.#live.get(effect.rid);
        if (stream !== undefined && stream.tokens(effect.ids, effect.logprobs) === 'stop') this.#gone(effect.rid); // the rest is aborted, acknowledged
        return;
      }
      case 'clientOutcome': {
        const stream = this.#live.get(effect.rid);
        this.#live.delete(effect.rid);
        if (stream === undefined) return;
        if (effect.outcome.ok) stream.finished(effect.outcome.finishReason, effect.outcome.cachedTokens ?? 0);
        else stream.failed(effect.outcome.error);
        return;
      }
      default:
        return assertNever(effect, 'router effect');
    }
  }
}
