// PrefillWorker: the prefill role of disaggregated serving (`tessera serve --role prefill`).
// The scheduler's prefill role computes prompts into this node's pool in chunks; the
// PrefillMachine (src/transfer) streams the computed K/V to decode's tagged pages, chunk by
// chunk as the prompt is computed, and holds the source pages until decode's Ack.
//
// Life of a request on a prefill node (R = router, D = decode):
//   1. R: Prefill -> machine -> host.admit -> scheduler.admit (this node's own limits: context
//      length, pool): refused -> Rejected -> R before any page or byte
//   2. the engine loop computes the prompt chunk by chunk; once step N is complete and step N+1
//      is on the engine thread, the worker reports step N's progress (`computed`: positions
//      [0, n) stamped in these tags) and the machine gathers, checksums and sends KvChunk frames
//      for the new positions while step N+1 computes (the loop's `beside`)
//   3. scheduler `prefilled` (the last chunk, first token sampled) -> `computeDone`, handed over
//      the same way: the last frames and KvDone -> D; the pages stay held
//   4. D: Ack -> host.release -> scheduler.release: the pages go to the prefix cache or free
//   Abort / a lost connection: host.stop -> scheduler.abort; a step in flight still writes the
//   pages: 'stopping', and `computeStopped` once the step is over -> AbortAck.
// Preemption (a prompt that lost its pages to another): it recomputes later, into new pages;
// progress is reported only past what was already sent, so no frame is ever sent twice, and the
// machine checks [0, n) against the current pages before every send.
//
// Inputs are applied as they arrive, not only between steps: every scheduler verb used here is
// safe at any time (an abort of an item in flight is deferred to complete()), and the machine
// reads pages only on `computed`/`computeDone`, which the worker sends beside the next step.
//
// Why a send never reads a slot the step in flight writes (docs/ARCHITECTURE.md, "Threads"):
// the progress reported is the scheduler's numComputed, which counts finished steps only, read
// after the next plan (so a request preempted by that plan reports nothing, and its tags are
// the current ones); the step in flight writes this request's positions [numComputed, ...) and
// other requests' own pages (the ledger gives a page one owner; cached pages are never written).
// The machine's checkRead before every send makes it a checked invariant: the runner stamps a
// slot only after the thread replied, so an unstamped (in-flight) slot fails the send honestly.
// `send-in-flight` is that bug on purpose (progress up to the end of the step in flight).
// Cluster-wide prefix store (transfer/prefix-fetch-store.ts): a Prefill that carries the router's
// `prefixHolder` hint enters the scheduler only after an async stage: the prompt's prefix pages
// this node lacks in every tier are fetched from that holder under its lease and installed in
// the prefix cache (the scheduler's match() then finds them); a miss is recomputed. A stop during
// the fetch drops the job (the fetched pages stay cached). Every prefill also serves its peers'
// fetches from its pool and disk tier.
// Must never: send a byte for a prompt this node refused, or report progress it did not compute.
import { clearTimeout, setTimeout } from 'node:timers';
import {
  InvariantError,
  TesseraError,
  assertNever,
  type BackendHealth,
  type BackendStats,
  type GenerateEvent,
  type NodePageMap,
  type PdMetricsSink,
  type GenerateRequest,
  type RequestId,
  type SamplingParams,
  type Tag,
  type BatchItem,
  type AdapterRef,
} from '../core/index.js';
import { PrefixHasher, type Owner, type PagePool } from '../pages/index.js';
import { Scheduler, type SchedulerEvent } from '../scheduler/index.js';
import {
  MachineDriver,
  PeerPrefixStore,
  PrefillMachine,
  type AdmitVerdict,
  type PrefillHost,
  type PrefillInput,
  type PrefillEffect,
  type PeerStoreStats,
  type Transport,
  type TransportHandlers,
} from '../transfer/index.js';
import type { TokenConstraint } from '../grammar/index.js';
import { constraintFor } from './constraints.js';
import type { EngineLoop } from '../engine/index.js';
import { promptLogprobsFor, type PromptLogprobs } from '../engine/index.js';
import { prefixReport } from './prefix-report.js';
import { notForClients, type PdWorkerOptions } from './pd-common.js';
import { setTierSource } from './tier-views.js';
import { listenCluster, PdRole } from './pd-role.js';
import type { LoraRegistry } from './lora-registry.js';

interface Job {
  readonly sampling: SamplingParams;
  /** Positions already reported to the machine (it has sent them). */
  reported: number;
  /** host.stop() said 'stopping': computeStopped once the scheduler has let go of it. */
  stopping: boolean;
  /** Structured output: the first token is sampled here, under the grammar's first mask. */
  readonly constraint?: TokenConstraint;
  /** Its prefix is being fetched from a peer: not in the scheduler yet. */
  fetching: boolean;
  /** sampling.promptLogprobs: filled by the prompt's chunks, sent in KvDone (prompt-logprobs.ts). */
  readonly prompt?: PromptLogprobs;
}

/** Most router hints kept for Prefills not yet admitted (a hint whose admission never comes is dropped, oldest first). */
const MAX_HINTS = 4096;

export class PrefillWorker {
  readonly modelName: string;
  readonly root: string;
  readonly contextLength: number;
  readonly role = 'prefill';
  readonly scheduler: Scheduler;
  readonly pool: PagePool;
  readonly machine: PrefillMachine;
  readonly transport: Transport;
  readonly #role: PdRole;
  readonly #loop: EngineLoop;
  readonly #driver: MachineDriver<PrefillInput, PrefillEffect>;
  readonly #jobs = new Map<RequestId, Job>();
  /** Prompts whose last chunk finished: computeDone goes to the machine beside the next step. */
  #done: Extract<PrefillInput, { kind: 'computeDone' }>[] = [];
  /** The items of the step in flight (for `send-in-flight` only). */
  #inFlight: readonly BatchItem[] = [];
  readonly #sendInFlight: boolean;
  /** Keys the prefix hashes /health reports (the cluster secret). */
  readonly #hasher: PrefixHasher;
  /** The cluster-wide prefix store: fetches before admission, serves peers. */
  readonly #peerStore: PeerPrefixStore | undefined;
  /** The router's prefixHolder hint of each Prefill, until its admission. */
  readonly #hints = new Map<RequestId, string>();

  /** Listens on the cluster address (prefill dials decode to push frames; the router dials us), then starts the loop. */
  static async start(options: PdWorkerOptions): Promise<PrefillWorker> {
    const { transport, late } = await listenCluster(options, true, false);
    const worker = new PrefillWorker(options, transport);
    late.handlers = worker.#handlers();
    const store = worker.#peerStore;
    if (store !== undefined) late.prefix = (from, m) => store.received(from, m);
    return worker;
  }

  private constructor(options: PdWorkerOptions, transport: Transport) {
    const { pool, faults } = options;
    this.#role = new PdRole('prefill', options, transport);
    this.modelName = options.modelName;
    this.root = options.root;
    this.contextLength = options.contextLength;
    this.pool = pool;
    this.transport = transport;
    this.scheduler = this.#role.scheduler;
    this.#sendInFlight = faults.has('send-in-flight');
    this.#hasher = new PrefixHasher(options.clusterSecret, faults.has('unkeyed-prefix-hashes'));
    const cache = this.scheduler.prefixCache;
    this.#peerStore =
      cache === undefined
        ? undefined
        : new PeerPrefixStore({
            cache,
            pool,
            model: options.modelFingerprint,
            io: transport,
            faults,
            schedule: (fn, ms) => {
              const timer = setTimeout(fn, ms);
              timer.unref();
              return () => clearTimeout(timer);
            },
          });
    const store = this.#peerStore;
    if (store !== undefined) {
      setTierSource(pool, 'peer', () => {
        const s = store.stats();
        return [
          {
            name: 'peer',
            pages: s.pagesInstalled,
            hits: s.requester.pagesFetched,
            misses: s.requester.pagesMissed,
            refused: s.requester.refused,
          },
        ];
      });
    }
    const host: PrefillHost = {
      pool,
      model: options.modelFingerprint,
      admit: (o, t, s, adapter) => this.#admit(o, t, s, adapter),
      stop: (o) => this.#stop(o),
      release: (o) => this.#release(o),
    };
    this.machine = new PrefillMachine({
      node: transport.nodeId,
      host,
      faults,
      ...(options.timeouts ? { timeouts: options.timeouts } : {}),
      ...(options.trace ? { trace: options.trace } : {}),
    });
    this.#role.machine = this.machine;
    this.#driver = new MachineDriver<PrefillInput, PrefillEffect>(this.machine, (effect) =>
      this.#role.carryOut(effect),
    );
    this.#loop = this.#role.startLoop({
      recordOf: (rid) => this.#jobs.get(rid),
      outputs: false,
      before: (items) => {
        this.#inFlight = items;
        return new Set();
      },
      onEvents: (events) => this.#onEvents(events),
      onFatal: (error) => this.#onFatal(error),
      more: {
        beside: () => this.#besideStep(),
        promptLogprobsOf: (rid) => {
          const record = this.#jobs.get(rid)?.prompt;
          const view = this.scheduler.view(rid);
          if (record === undefined || view === undefined || view.state === 'ending') return undefined;
          return { record, numTokens: view.numPromptTokens + view.numOutputTokens };
        },
      },
    });
  }

  /** Its LoRA adapters (--lora; not the front end's `adapters`: clients and hot loads go to the router). */
  get loras(): LoraRegistry | undefined {
    return this.#role.adapters;
  }

  /** This node's id on the cluster network: where the router and decode reach it. */
  get address(): string {
    return this.transport.nodeId;
  }

  /** Clients talk to the router. */
  generate(_request: GenerateRequest, _signal: AbortSignal): AsyncIterable<GenerateEvent> {
    return notForClients('prefill');
  }

  /** The cluster-wide prefix store's counters (src/api's kvPeerMetrics); undefined without a prefix cache. */
  peerStats(): PeerStoreStats | undefined {
    return this.#peerStore?.stats();
  }

  /** The PD series of this worker's /metrics (src/api's pdMetrics hook). */
  attachMetrics(sink: PdMetricsSink): void {
    this.#role.metrics = sink;
  }

  /** No request computing or waiting for its Ack, and the scheduler holds nothing. */
  get isIdle(): boolean {
    return this.#role.isIdle;
  }

  async health(): Promise<BackendHealth> {
    return this.#role.health({
      waiting: this.scheduler.numWaiting,
      held: this.scheduler.numHeld,
      ...prefixReport(this.scheduler.prefixCache, this.#hasher),
    });
  }

  async stats(): Promise<BackendStats> {
    const s = this.machine.stats();
    this.#role.syncMetrics(s.bytesSent, s.abortsByState);
    return this.#role.stats(this.scheduler.numWaiting);
  }

  /** The operator's page map (admin-only /dashboard): the ledger and the transfers being sent. */
  async pageMap(): Promise<NodePageMap> {
    const s = this.machine.stats();
    return this.#role.pageMap(
      {
        waiting: this.scheduler.numWaiting,
        transfers: this.machine.inFlight(),
        quarantined: [],
        totals: {
          admitted: s.admitted,
          rejected: s.rejected,
          'transfers acked': s.transfersAcked,
          'ack timeouts': s.ackTimeouts,
          'tag mismatches': this.pool.numCheckFailures,
        },
      },
      s.abortsByState,
    );
  }

  /** Waits up to drainMs for transfers to end, then closes every connection and stops the loop. */
  async close(drainMs: number): Promise<void> {
    const endAll = (): void => {
      for (const rid of [...this.#jobs.keys()]) this.scheduler.abort(rid);
      for (const rid of [...this.#jobs.keys()]) this.#dropJob(rid);
    };
    await this.#role.close(
      drainMs,
      () => {
        this.#driver.stop();
        this.#peerStore?.close();
      },
      endAll,
    );
  }

  /** The transport's events: the machine's, plus the router's hint read off each Prefill and closes told to the peer store. */
  #handlers(): TransportHandlers {
    const machine = this.#driver.handlers();
    return {
      connected: (peer) => machine.connected(peer),
      message: (from, m) => {
        // A request that wants its prompt's log-probabilities computes every position (plan.ts
        // matches no cached prefix for it): a peer's pages would be fetched for nothing.
        if (
          m.type === 'Prefill' &&
          m.prefixHolder !== undefined &&
          m.prefixHolder !== this.address &&
          m.sampling.promptLogprobs === undefined
        ) {
          this.#hints.set(m.rid, m.prefixHolder);
          if (this.#hints.size > MAX_HINTS) this.#hints.delete(this.#hints.keys().next().value as RequestId);
        }
        machine.message(from, m);
      },
      closed: (peer, reason) => {
        this.#peerStore?.closed(peer);
        machine.closed(peer, reason);
      },
    };
  }

  #admit(owner: Owner, tokens: readonly number[], sampling: SamplingParams, adapter?: AdapterRef): AdmitVerdict {
    const refusal = this.#role.refusal() ?? this.#role.adapterRefusal(adapter);
    if (refusal !== undefined) return { kind: 'rejected', error: refusal };
    const constraint = constraintFor({ sampling, tenant: owner.tenant }, this.#role.options.grammar);
    if (constraint instanceof TesseraError) return { kind: 'rejected', error: constraint };
    const holder = this.#hints.get(owner.rid);
    this.#hints.delete(owner.rid);
    if (holder !== undefined && this.#peerStore !== undefined) {
      this.#jobs.set(owner.rid, {
        sampling,
        reported: 0,
        stopping: false,
        fetching: true,
        ...(constraint === undefined ? {} : { constraint }),
        ...promptOf(tokens, sampling),
      });
      void this.#fetchThenAdmit(this.#peerStore, owner, tokens, sampling, holder, adapter);
      return { kind: 'admitted' };
    }
    const verdict = this.scheduler.admit(requestOf(owner, tokens, sampling, adapter));
    if (verdict.kind === 'rejected') {
      constraint?.dispose();
      return verdict;
    }
    this.#jobs.set(owner.rid, {
      sampling,
      reported: 0,
      stopping: false,
      fetching: false,
      ...(constraint === undefined ? {} : { constraint }),
      ...promptOf(tokens, sampling),
    });
    this.#loop.wake();
    return { kind: 'admitted' };
  }

  /**
   * The async stage before the scheduler: fetch the prefix pages this node lacks from holder
   * (installed in the prefix cache), then admit. A job stopped meanwhile is gone: nothing to admit.
   */
  async #fetchThenAdmit(
    store: PeerPrefixStore,
    owner: Owner,
    tokens: readonly number[],
    sampling: SamplingParams,
    holder: string,
    adapter: AdapterRef | undefined,
  ): Promise<void> {
    await store.fill(owner.tenant, tokens, holder);
    const job = this.#jobs.get(owner.rid);
    if (job === undefined || !job.fetching) return;
    job.fetching = false;
    // The adapter may have been unloaded (or replaced) during the fetch: checked again, before any step runs it.
    const refusal = this.#role.refusal() ?? this.#role.adapterRefusal(adapter);
    const verdict =
      refusal !== undefined
        ? ({ kind: 'rejected', error: refusal } as const)
        : this.scheduler.admit(requestOf(owner, tokens, sampling, adapter));
    if (verdict.kind === 'rejected') {
      this.#dropJob(owner.rid);
      this.#driver.handle({ kind: 'computeFailed', rid: owner.rid, error: verdict.error });
      return;
    }
    this.#loop.wake();
  }

  /** Forgets a job (disposing its grammar state); false when there was none. */
  #dropJob(rid: RequestId): boolean {
    this.#jobs.get(rid)?.constraint?.dispose();
    return this.#jobs.delete(rid);
  }

  #stop(owner: Owner): 'stopped' | 'stopping' {
    const job = this.#jobs.get(owner.rid);
    const result = this.scheduler.abort(owner.rid);
    this.#loop.wake(); // pages came back (or will after the step): a waiting prompt may fit
    if (result.kind === 'aborted' && result.pages === 'after-step' && job !== undefined) {
      job.stopping = true;
      return 'stopping';
    }
    this.#dropJob(owner.rid);
    return 'stopped';
  }

  #release(owner: Owner): void {
    this.#dropJob(owner.rid);
    this.scheduler.release(owner.rid);
    this.#loop.wake();
  }

  #onEvents(events: readonly SchedulerEvent[]): void {
    for (const event of events) {
      switch (event.kind) {
        case 'prefilled': {
          const job = this.#jobs.get(event.rid);
          if (job === undefined) continue;
          job.reported = event.numTokens;
          job.constraint?.dispose(); // its one token is sampled; decode rebuilds the state from it
          this.#done.push({
            kind: 'computeDone',
            rid: event.rid,
            tags: event.tags,
            firstToken: event.firstToken,
            firstLogprobs: event.firstLogprob === undefined ? [] : [event.firstLogprob],
            cachedTokens: event.numCachedTokens ?? 0,
            // Positions 1.. (the first has none); every prompt chunk filled them before this one sampled.
            ...(job.prompt === undefined
              ? {}
              : { promptLogprobs: job.prompt.logprobs.slice(1).filter((lp) => lp !== null) }),
          });
          break;
        }
        case 'failed':
          if (!this.#dropJob(event.rid)) continue;
          this.#driver.handle({ kind: 'computeFailed', rid: event.rid, error: event.error });
          break;
        case 'token':
        case 'finished':
          throw new InvariantError(`a prefill scheduler reported ${event.kind} for ${event.rid}`);
        default:
          assertNever(event, 'scheduler event');
      }
    }
  }

  /**
   * Beside the step in flight (or when none follows): stopped requests are let go; what earlier
   * steps computed goes out as frames (the machine gathers and checksums it here, on the main
   * thread, while the engine thread computes).
   */
  #besideStep(): void {
    const done = this.#done;
    this.#done = [];
    for (const input of done) if (this.#jobs.has(input.rid)) this.#driver.handle(input);
    const inFlight = this.#sendInFlight ? this.#inFlightEnds() : undefined;
    for (const [rid, job] of [...this.#jobs]) {
      const view = this.scheduler.view(rid);
      if (job.stopping) {
        if (view !== undefined) continue; // still ending (cannot happen after complete(), but wait)
        this.#dropJob(rid);
        this.#driver.handle({ kind: 'computeStopped', rid });
        continue;
      }
      if (view === undefined || view.state !== 'prefilling') continue;
      // send-in-flight (the bug on purpose): claim the positions the step in flight is writing.
      const numTokens = inFlight?.get(rid) ?? view.numComputed;
      if (numTokens <= job.reported) continue;
      job.reported = numTokens;
      this.#driver.handle({ kind: 'computed', rid, numTokens, tags: view.tags as readonly Tag[] });
    }
  }

  /** Per request in the step in flight, the end of what it writes (only for `send-in-flight`). */
  #inFlightEnds(): Map<RequestId, number> {
    const ends = new Map<RequestId, number>();
    for (const item of this.#inFlight) ends.set(item.rid, item.startPos + item.tokens.length);
    return ends;
  }

  #onFatal(error: unknown): void {
    const failure = new InvariantError('the prefill worker stopped after an internal error', error);
    for (const rid of [...this.#jobs.keys()]) {
      this.#dropJob(rid);
      this.#driver.handle({ kind: 'computeFailed', rid, error: failure });
    }
    this.#role.options.onFatal(error);
  }
}

/** A job's prompt log-probabilities record, when its sampling asks for them. */
function promptOf(tokens: readonly number[], sampling: SamplingParams): { readonly prompt?: PromptLogprobs } {
  const topN = sampling.promptLogprobs;
  return topN === undefined ? {} : { prompt: promptLogprobsFor(tokens, topN) };
}

/** The scheduler's request for a Prefill: owner.tenant already carries the adapter's digest (kvTenantOf). */
function requestOf(
  owner: Owner,
  tokens: readonly number[],
  sampling: SamplingParams,
  adapter: AdapterRef | undefined,
): GenerateRequest {
  return {
    rid: owner.rid,
    tenant: owner.tenant,
    promptTokens: tokens,
    sampling,
    ...(adapter === undefined ? {} : { adapter }),
  };
}
