// DecodeWorker: the decode role of disaggregated serving (`tessera serve --role decode`).
// The DecodeMachine (src/transfer) reserves tagged pages through the scheduler's decode role,
// checks and writes every KV frame a prefill pushes, verifies coverage from its own stamps, and
// hands the request to the engine loop, which decodes it like any other; tokens go back to the
// router as Tokens messages.
//
// Life of a request on a decode node (R = router, P = the prefill that writes its pages):
//   1. R: Reserve -> machine -> host.reserve -> scheduler.reserve: admission with this node's
//      limits (prompt + max_tokens against its context length and pool), then pages with new
//      epochs; refused -> Rejected -> R before any page is allocated
//   2. P: KvChunk ... -> the machine checks tag, slots, seq, size, order on its header; lands the
//      payload in the page piece by piece as it arrives; verifies the checksum; stamps
//   3. P: KvDone -> the machine verifies counts, digests and coverage; Ack -> P; effect
//      startDecoding -> scheduler.startDecode (which checks the stamps cover the prompt again)
//   4. the engine loop decodes; each token -> `decodeTokens` -> Tokens -> R; the first token has
//      one path: prefill sampled it, KvDone carried it, the machine sends it first (startDecode
//      emits no event for it); finished / failed -> `decodeFinished` / `decodeFailed`
//   Abort or a failed check while receiving: quarantine (scheduler.abort 'peer-may-write')
//   until P's AbortAck or P's connection closes (release). While decoding: stopDecoding ->
//   scheduler.abort (after the step in flight, if any).
//
// The prompt's token ids never come here (Reserve carries their number and digest): the
// scheduler holds placeholders for them. So a request must never be recomputed on a decode
// node: the decode scheduler's plan fails a request it would preempt (an honest `overloaded`,
// an event of that plan), so nothing of it is ever computed from placeholders.
// Trace: besides the machine's events, the worker emits `read` of the transferred pages at each
// decode step and `free` when the request ends (trace.ts).
import {
  assertNever,
  InvariantError,
  TesseraError,
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
import type { Owner, PagePool } from '../pages/index.js';
import { Scheduler, type SchedulerEvent } from '../scheduler/index.js';
import {
  DecodeMachine,
  MachineDriver,
  NO_TRACE,
  Tracer,
  type DecodeEffect,
  type DecodeHost,
  type DecodeInput,
  type ReserveVerdict,
  type Transport,
} from '../transfer/index.js';
import type { TokenConstraint } from '../grammar/index.js';
import { constraintFor } from './constraints.js';
import type { EngineLoop } from '../engine/index.js';
import { speculationHealth } from './health.js';
import { speculationView } from './page-map.js';
import { notForClients, type PdWorkerOptions } from './pd-common.js';
import { listenCluster, PdRole } from './pd-role.js';
import type { LoraRegistry } from './lora-registry.js';

interface Decoding {
  readonly owner: Owner;
  readonly sampling: SamplingParams;
  /** The pages the transfer filled (the trace's page table for this request). */
  readonly tags: readonly Tag[];
  /** Structured output: rebuilt here by replaying every token (the first is prefill's, from KvDone). */
  readonly constraint?: TokenConstraint;
}

export class DecodeWorker {
  readonly modelName: string;
  readonly root: string;
  readonly contextLength: number;
  readonly role = 'decode';
  readonly scheduler: Scheduler;
  readonly pool: PagePool;
  readonly machine: DecodeMachine;
  readonly transport: Transport;
  readonly #role: PdRole;
  readonly #tracer: Tracer;
  readonly #drafter: PdWorkerOptions['drafter'];
  readonly #speculates: boolean;
  readonly #loop: EngineLoop;
  readonly #driver: MachineDriver<DecodeInput, DecodeEffect>;
  readonly #decoding = new Map<RequestId, Decoding>();

  /** Listens on the cluster address (the router and the prefills dial decode), then starts the loop. */
  static async start(options: PdWorkerOptions): Promise<DecodeWorker> {
    const { transport, late } = await listenCluster(options, false, true); // KvChunk payloads land as they arrive
    const worker = new DecodeWorker(options, transport);
    late.handlers = worker.#driver.handlers();
    late.chunks = worker.#driver.chunkHandlers();
    return worker;
  }

  private constructor(options: PdWorkerOptions, transport: Transport) {
    const { pool, faults } = options;
    this.#drafter = options.drafter;
    this.#speculates = options.speculation !== undefined && options.speculation.maxDraft > 0;
    this.#role = new PdRole('decode', options, transport);
    this.modelName = options.modelName;
    this.root = options.root;
    this.contextLength = options.contextLength;
    this.pool = pool;
    this.transport = transport;
    this.scheduler = this.#role.scheduler;
    const trace = options.trace ?? NO_TRACE;
    this.#tracer = new Tracer(trace, transport.nodeId, 'decode');
    const host: DecodeHost = {
      pool,
      model: options.modelFingerprint,
      reserve: (owner, n, sampling, adapter) => this.#reserve(owner, n, sampling, adapter),
      free: (owner) => void this.scheduler.abort(owner.rid),
      quarantine: (owner) => void this.scheduler.abort(owner.rid, 'peer-may-write'),
      release: (owner) => {
        this.scheduler.release(owner.rid);
        this.#loop.wake();
      },
    };
    this.machine = new DecodeMachine({
      node: transport.nodeId,
      host,
      faults,
      trace,
      ...(options.timeouts ? { timeouts: options.timeouts } : {}),
    });
    this.#role.machine = this.machine;
    this.#driver = new MachineDriver<DecodeInput, DecodeEffect>(this.machine, (effect) => this.#carryOut(effect));
    this.#loop = this.#role.startLoop({
      recordOf: (rid) => this.#decoding.get(rid),
      outputs: true,
      before: (items) => this.#beforeStep(items),
      onEvents: (events) => this.#onEvents(events),
      onFatal: (error) => this.#onFatal(error),
      more: {
        pool, // speculation's rollback of rejected drafts (spec-verify.ts)
        ...(options.drafter === undefined ? {} : { drafter: options.drafter.model }),
      },
    });
  }

  /** Its LoRA adapters (--lora; not the front end's `adapters`: clients and hot loads go to the router). */
  get loras(): LoraRegistry | undefined {
    return this.#role.adapters;
  }

  get address(): string {
    return this.transport.nodeId;
  }

  generate(_request: GenerateRequest, _signal: AbortSignal): AsyncIterable<GenerateEvent> {
    return notForClients('decode');
  }

  attachMetrics(sink: PdMetricsSink): void {
    this.#role.metrics = sink;
  }

  get isIdle(): boolean {
    return this.#role.isIdle;
  }

  async health(): Promise<BackendHealth> {
    return this.#role.health({
      receiving: this.scheduler.numReceiving,
      quarantined: this.scheduler.numQuarantined,
      preempted: this.scheduler.numPreemptions,
      ...speculationHealth(
        this.scheduler.specStats,
        this.#loop.numRolledBack,
        this.#drafter === undefined ? undefined : { name: this.#drafter.name, stats: this.#drafter.model.stats },
      ),
    });
  }

  async stats(): Promise<BackendStats> {
    const s = this.machine.stats();
    const m = this.#role.syncMetrics(s.bytesWritten, s.abortsByState);
    if (m !== undefined)
      for (let i = this.#role.mirror.delta('checksums', s.checksumFailures); i > 0; i--) m.countChecksumFailure();
    return this.#role.stats(this.scheduler.numReceiving + this.scheduler.numWaiting);
  }

  /** The operator's page map (admin-only /dashboard): the ledger, transfers being received, quarantine. */
  async pageMap(): Promise<NodePageMap> {
    const s = this.machine.stats();
    const { transfers, quarantined } = this.machine.inFlight();
    return this.#role.pageMap(
      {
        waiting: this.scheduler.numReceiving + this.scheduler.numWaiting,
        transfers,
        quarantined,
        totals: {
          'transfers verified': s.transfersVerified,
          'transfers failed': s.transfersFailed,
          'checksum failures': s.checksumFailures,
          'frames dropped': s.framesDropped,
          'tag mismatches': this.pool.numCheckFailures,
          preempted: this.scheduler.numPreemptions,
        },
      },
      s.abortsByState,
      this.#speculates
        ? speculationView(this.scheduler.specStats, this.#loop.numRolledBack, this.#drafter?.model.stats)
        : undefined,
    );
  }

  async close(drainMs: number): Promise<void> {
    const endAll = (): void => {
      for (const rid of [...this.#decoding.keys()]) this.#end(rid);
    };
    await this.#role.close(drainMs, () => this.#driver.stop(), endAll);
  }

  #reserve(owner: Owner, promptTokens: number, sampling: SamplingParams, adapter?: AdapterRef): ReserveVerdict {
    const refusal = this.#role.refusal() ?? this.#role.adapterRefusal(adapter);
    if (refusal !== undefined) return { kind: 'rejected', error: refusal };
    // Structured output: refused before any page when this node cannot enforce it; else its
    // grammar starts compiling now, while prefill computes (startDecoding builds the matcher).
    const constraint = constraintFor({ sampling, tenant: owner.tenant }, this.#role.options.grammar);
    if (constraint instanceof TesseraError) return { kind: 'rejected', error: constraint };
    constraint?.dispose();
    // Placeholders for the prompt's ids: only their number matters here (see the top of the file).
    const request: GenerateRequest = {
      rid: owner.rid,
      tenant: owner.tenant,
      promptTokens: new Array<number>(promptTokens).fill(0),
      sampling,
      ...(adapter === undefined ? {} : { adapter }),
    };
    return this.scheduler.reserve(request);
  }

  #carryOut(effect: DecodeEffect): void {
    switch (effect.kind) {
      case 'send':
      case 'closePeer':
        return this.#role.carryOut(effect);
      case 'startDecoding': {
        if (effect.transferMs !== null) this.#role.metrics?.observeTransferSeconds(effect.transferMs / 1000);
        const constraint = constraintFor(
          { sampling: effect.sampling, tenant: effect.owner.tenant },
          this.#role.options.grammar,
        );
        if (constraint instanceof TesseraError)
          throw new InvariantError(
            `startDecoding: ${effect.rid}'s constraint was accepted at Reserve: ${constraint.message}`,
          );
        constraint?.accept(effect.firstToken); // prefill sampled it under the first mask
        this.#decoding.set(effect.rid, {
          owner: effect.owner,
          sampling: effect.sampling,
          tags: effect.tags,
          ...(constraint === undefined ? {} : { constraint }),
        });
        const result = this.scheduler.startDecode(effect.rid, effect.firstToken);
        if (result.kind === 'not-found')
          throw new InvariantError(`startDecoding: the scheduler does not know ${effect.rid}`);
        this.#onEvents(result.events);
        this.#loop.wake();
        return;
      }
      case 'stopDecoding':
        this.scheduler.abort(effect.rid);
        this.#end(effect.rid);
        this.#loop.wake();
        return;
      default:
        return assertNever(effect, 'decode effect');
    }
  }

  #onEvents(events: readonly SchedulerEvent[]): void {
    for (const event of events) {
      const d = this.#decoding.get(event.rid);
      if (d === undefined) continue; // stopped meanwhile
      switch (event.kind) {
        case 'token': // every one the engine sampled here (the first, KvDone's, the machine sends itself)
          d.constraint?.accept(event.token);
          this.#driver.handle({
            kind: 'decodeTokens',
            rid: event.rid,
            ids: [event.token],
            logprobs: event.logprob === undefined ? [] : [event.logprob],
          });
          break;
        case 'finished':
          this.#end(event.rid);
          this.#driver.handle({ kind: 'decodeFinished', rid: event.rid, finishReason: event.finishReason });
          break;
        case 'failed':
          this.#end(event.rid);
          this.#driver.handle({ kind: 'decodeFailed', rid: event.rid, error: event.error });
          break;
        case 'prefilled':
          throw new InvariantError(`a decode scheduler reported ${event.rid} prefilled`);
        default:
          assertNever(event, 'scheduler event');
      }
    }
  }

  /** Before a step: items of requests that ended meanwhile are skipped; the rest read their pages. */
  #beforeStep(items: readonly BatchItem[]): ReadonlySet<BatchItem> {
    const skip = new Set<BatchItem>();
    for (const item of items) {
      const d = this.#decoding.get(item.rid);
      if (d === undefined) {
        if (this.scheduler.view(item.rid)?.state === 'ending') skip.add(item);
        continue;
      }
      this.#tracer.page(item.rid, 'read', d.tags);
    }
    return skip;
  }

  /** The request left the decoder: its transferred pages are the scheduler's to free. */
  #end(rid: RequestId): void {
    const d = this.#decoding.get(rid);
    if (d === undefined) return;
    this.#decoding.delete(rid);
    d.constraint?.dispose();
    this.#tracer.page(rid, 'free', d.tags);
  }

  #onFatal(error: unknown): void {
    const failure = new InvariantError('the decode worker stopped after an internal error', error);
    for (const rid of [...this.#decoding.keys()]) {
      this.#end(rid);
      this.#driver.handle({ kind: 'decodeFailed', rid, error: failure });
    }
    this.#role.options.onFatal(error);
  }
}
