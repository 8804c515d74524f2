// PrefillWorker: the prefill role of disaggregated serving (`tessera serve --role prefill`).
// The scheduler's prefill role computes prompts into this node's pool in chunks; the
// PrefillMachine (src/transfer) streams the computed K/V to decode's tagged pages, chunk by
// chunk as the prompt is computed, and holds the source pages until decode's Ack.
//
// Life of a request on a prefill node (R = router, D = decode):
//   1. R: Prefill -> machine -> host.admit -> scheduler.admit (this node's own limits: context
//      length, pool): refused -> Rejected -> R before any page or byte
//   2. the engine loop computes the prompt chunk by chunk; after every step the worker reports
//      progress (`computed`: positions [0, n) stamped in these tags), the machine sends KvChunk
//      frames for the new positions straight away (the transfer overlaps the compute)
//   3. scheduler `prefilled` (the last chunk, first token sampled) -> `computeDone`: the last
//      frames and KvDone -> D; the pages stay held
//   4. D: Ack -> host.release -> scheduler.release: the pages go to the prefix cache or free
//   Abort / a lost connection: host.stop -> scheduler.abort; a step in flight still writes the
//   pages: 'stopping', and `computeStopped` once the step is over -> AbortAck.
// Preemption (a prompt that lost its pages to another): it recomputes later, into new pages;
// progress is reported only past what was already sent, so no frame is ever sent twice, and the
// machine checks [0, n) against the current pages before every send.
//
// Inputs are applied as they arrive, not only between steps: every scheduler verb used here is
// safe at any time (an abort of an item in flight is deferred to complete()), and the machine
// reads pages only on `computed`/`computeDone`, which the worker sends after a step.
// Must never: send a byte for a prompt this node refused, or report progress it did not compute.
import { InvariantError, syncAborts, TesseraError, TotalsMirror, assertNever, type BackendHealth, type BackendStats, type GenerateEvent, type NodePageMap, type PdMetricsSink, type GenerateRequest, type RequestId, type SamplingParams, type Tag } from '../core/index.js';
import type { Owner, PagePool } from '../pages/index.js';
import { Scheduler, type SchedulerEvent } from '../scheduler/index.js';
import { MachineDriver, PrefillMachine, TcpTransport, type AdmitVerdict, type PrefillHost, type PrefillInput, type PrefillEffect, type Transport } from '../transfer/index.js';
import type { TokenConstraint } from '../grammar/index.js';
import { constraintFor, prepareConstraints } from './constraints.js';
import { EngineLoop } from './engine-loop.js';
import { schedulerFor } from './scheduler-for.js';
import { HookedRunner } from './hooked-runner.js';
import { pdHealth } from './health.js';
import { abortTotals, nodePageMap } from './page-map.js';
import { prefixReport } from './prefix-report.js';
import { notForClients, type PdWorkerOptions } from './pd-common.js';

interface Job {
  readonly sampling: SamplingParams;
  /** Positions already reported to the machine (it has sent them). */
  reported: number;
  /** host.stop() said 'stopping': computeStopped once the scheduler has let go of it. */
  stopping: boolean;
  /** Structured output: the first token is sampled here, under the grammar's first mask. */
  readonly constraint?: TokenConstraint;
}

export class PrefillWorker {
  readonly modelName: string;
  readonly root: string;
  readonly contextLength: number;
  readonly role = 'prefill';
  readonly scheduler: Scheduler;
  readonly pool: PagePool;
  readonly machine: PrefillMachine;
  readonly transport: Transport;
  readonly #o: PdWorkerOptions;
  readonly #loop: EngineLoop;
  readonly #driver: MachineDriver<PrefillInput, PrefillEffect>;
  readonly #jobs = new Map<RequestId, Job>();
  readonly #mirror = new TotalsMirror();
  #metrics: PdMetricsSink | undefined;
  #closed = false;

  /** Listens on the cluster address, then starts the loop. */
  static async start(options: PdWorkerOptions): Promise<PrefillWorker> {
    let handlers: ReturnType<MachineDriver<PrefillInput, PrefillEffect>['handlers']> | undefined;
    const transport = await TcpTransport.listen({
      host: options.clusterHost,
      port: options.clusterPort,
      secret: options.clusterSecret,
      dial: true, // prefill dials decode to push frames; the router dials us
      handlers: {
        connected: (peer) => handlers?.connected(peer),
        message: (from, message) => handlers?.message(from, message),
        closed: (peer, reason) => handlers?.closed(peer, reason),
      },
    });
    const worker = new PrefillWorker(options, transport);
    handlers = worker.#driver.handlers();
    return worker;
  }

  private constructor(options: PdWorkerOptions, transport: Transport) {
    const { pool, faults } = options;
    this.#o = options;
    this.modelName = options.modelName;
    this.root = options.root;
    this.contextLength = options.contextLength;
    this.pool = pool;
    this.transport = transport;
    this.scheduler = schedulerFor('prefill', options);
    const host: PrefillHost = { pool, model: options.modelFingerprint, admit: (o, t, s) => this.#admit(o, t, s), stop: (o) => this.#stop(o), release: (o) => this.#release(o) };
    this.machine = new PrefillMachine({ node: transport.nodeId, host, faults, ...(options.timeouts ? { timeouts: options.timeouts } : {}), ...(options.trace ? { trace: options.trace } : {}) });
    this.#driver = new MachineDriver<PrefillInput, PrefillEffect>(this.machine, (effect) => this.#carryOut(effect));
    this.#loop = new EngineLoop({
      scheduler: this.scheduler,
      runner: new HookedRunner(options.runner, { before: () => new Set(), after: () => this.#afterStep() }),
      sampler: options.sampler,
      samplingOf: (rid) => {
        const job = this.#jobs.get(rid);
        if (job === undefined) return undefined;
        const { constraint } = job;
        return { params: job.sampling, numOutputTokens: 0, outputTokens: () => [], ...(constraint === undefined ? {} : { mask: () => constraint.mask() }) };
      },
      prepareSampling: (items) => prepareConstraints(items, (rid) => this.#jobs.get(rid)?.constraint),
      onEvents: (events) => this.#onEvents(events),
      onFatal: (error) => this.#onFatal(error),
      faults,
      checkEveryStep: options.checkEveryStep,
      ...(options.maxStepMs === undefined ? {} : { maxStepMs: options.maxStepMs }),
    });
    this.#loop.start();
  }

  /** This node's id on the cluster network: where the router and decode reach it. */
  get address(): string {
    return this.transport.nodeId;
  }

  /** Clients talk to the router. */
  generate(_request: GenerateRequest, _signal: AbortSignal): AsyncIterable<GenerateEvent> {
    return notForClients('prefill');
  }

  /** The PD series of this worker's /metrics (src/api's pdMetrics hook). */
  attachMetrics(sink: PdMetricsSink): void {
    this.#metrics = sink;
  }

  /** No request computing or waiting for its Ack, and the scheduler holds nothing. */
  get isIdle(): boolean {
    return this.scheduler.isIdle && this.machine.numActive === 0;
  }

  async health(): Promise<BackendHealth> {
    const loop = this.#loop.stats;
    return {
      healthy: this.#loop.healthy && !this.#closed,
      detail: pdHealth(
        { role: 'prefill', options: this.#o, address: this.address, pool: this.pool, idle: this.isIdle, running: this.scheduler.numRunning, active: this.machine.numActive, transfer: this.machine.stats(), transport: this.transport.stats(), loop },
        { waiting: this.scheduler.numWaiting, held: this.scheduler.numHeld, ...prefixReport(this.scheduler.prefixCache) },
      ),
    };
  }

  async stats(): Promise<BackendStats> {
    const m = this.#metrics;
    if (m !== undefined) {
      const s = this.machine.stats();
      m.addTransferBytes(this.#mirror.delta('bytes', s.bytesSent));
      syncAborts(this.#mirror, m, s.abortsByState);
    }
    return {
      kvPages: this.pool.ledger.counts(),
      requestsRunning: this.scheduler.numRunning,
      requestsWaiting: this.scheduler.numWaiting,
      tagMismatchesTotal: this.pool.numCheckFailures,
    };
  }

  /** Waits up to drainMs for transfers to end, then closes every connection and stops the loop. */
  /** The operator's page map (admin-only /dashboard): the ledger and the transfers being sent. */
  async pageMap(): Promise<NodePageMap> {
    const s = this.machine.stats();
    return nodePageMap({
      role: 'prefill', node: this.address, pool: this.pool, loop: this.#loop.stats, running: this.scheduler.numRunning, waiting: this.scheduler.numWaiting,
      transfers: this.machine.inFlight(), quarantined: [],
      totals: { admitted: s.admitted, rejected: s.rejected, 'transfers acked': s.transfersAcked, 'ack timeouts': s.ackTimeouts, 'tag mismatches': this.pool.numCheckFailures, ...abortTotals(s.abortsByState) },
    });
  }

  async close(drainMs: number): Promise<void> {
    this.#closed = true;
    const until = Date.now() + drainMs;
    while (this.machine.numActive > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    this.#driver.stop();
    await this.transport.close();
    for (const rid of [...this.#jobs.keys()]) this.scheduler.abort(rid);
    for (const rid of [...this.#jobs.keys()]) this.#dropJob(rid);
    await this.#loop.close();
  }

  #admit(owner: Owner, tokens: readonly number[], sampling: SamplingParams): AdmitVerdict {
    if (this.#closed) return { kind: 'rejected', error: new TesseraError('overloaded', 'this prefill worker is shutting down') };
    if (!this.#loop.healthy) return { kind: 'rejected', error: new InvariantError('this prefill worker stopped after an internal error') };
    const constraint = constraintFor({ sampling }, this.#o.grammar);
    if (constraint instanceof TesseraError) return { kind: 'rejected', error: constraint };
    const verdict = this.scheduler.admit({ rid: owner.rid, tenant: owner.tenant, promptTokens: tokens, sampling });
    if (verdict.kind === 'rejected') {
      constraint?.dispose();
      return verdict;
    }
    this.#jobs.set(owner.rid, { sampling, reported: 0, stopping: false, ...(constraint === undefined ? {} : { constraint }) });
    this.#loop.wake();
    return { kind: 'admitted' };
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

  #carryOut(effect: PrefillEffect): void {
    switch (effect.kind) {
      case 'send':
        return this.transport.send(effect.to, effect.message);
      case 'closePeer':
        return this.transport.closePeer(effect.peer, effect.reason);
      default:
        return assertNever(effect, 'prefill effect');
    }
  }

  #onEvents(events: readonly SchedulerEvent[]): void {
    for (const event of events) {
      switch (event.kind) {
        case 'prefilled': {
          const job = this.#jobs.get(event.rid);
          if (job === undefined) continue;
          job.reported = event.numTokens;
          job.constraint?.dispose(); // its one token is sampled; decode rebuilds the state from it
          this.#driver.handle({ kind: 'computeDone', rid: event.rid, tags: event.tags, firstToken: event.firstToken, firstLogprobs: event.firstLogprob === undefined ? [] : [event.firstLogprob], cachedTokens: event.numCachedTokens ?? 0 });
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

  /** After each step: stopped requests are let go; computed positions go out as frames. */
  #afterStep(): void {
    for (const [rid, job] of [...this.#jobs]) {
      const view = this.scheduler.view(rid);
      if (job.stopping) {
        if (view !== undefined) continue; // still ending (cannot happen after complete(), but wait)
        this.#dropJob(rid);
        this.#driver.handle({ kind: 'computeStopped', rid });
        continue;
      }
      if (view === undefined || view.state !== 'prefilling' || view.numComputed <= job.reported) continue;
      job.reported = view.numComputed;
      this.#driver.handle({ kind: 'computed', rid, numTokens: view.numComputed, tags: view.tags as readonly Tag[] });
    }
  }

  #onFatal(error: unknown): void {
    const failure = new InvariantError('the prefill worker stopped after an internal error', error);
    for (const rid of [...this.#jobs.keys()]) {
      this.#dropJob(rid);
      this.#driver.handle({ kind: 'computeFailed', rid, error: failure });
    }
    this.#o.onFatal(error);
  }
}
