// ColocatedWorker: one process, one pool, prefill and decode in the same steps. It is the back
// end `tessera serve` hands to the HTTP front end (src/api's Backend, matched structurally:
// the worker sits below the api layer and may not import it).
//
// Life of a request here:
//   1. generate(): admission (scheduler.admit) before any page is touched; a refusal is the
//      request's only event (`failed`, e.g. pool_too_small -> HTTP 400)
//   2. the engine loop (engine-loop.ts) prefills it in chunks, then decodes it step by step
//   3. every sampled id goes through its TextStream: text out as it completes, stop strings
//      found here end it with scheduler.finish(rid, 'stop') and the match is never sent
//   4. `finished` (usage from the scheduler) or `failed`; nothing after either
//   5. the client's AbortSignal, or the reader leaving early, aborts it at any point:
//      scheduler.abort(rid) returns its pages (after the step in flight, if it is in one)
// Must never emit an event for a request after its end, nor keep a page for a request whose
// client is gone.
import {
  AbortedError,
  assertNever,
  EventChannel,
  TextOutput,
  TextStream,
  InvariantError,
  TesseraError,
  kvTenantOf,
  type BackendHealth,
  type BackendStats,
  type Detokenizer,
  type FaultSet,
  type GenerateEvent,
  type GenerateRequest,
  type NodePageMap,
  type RequestId,
  type TokenLogprob,
} from '../core/index.js';
import type { GrammarEngine, TokenConstraint } from '../grammar/index.js';
import type { LoraControl, DraftModel, SamplingState, TokenSampler } from '../engine/index.js';
import { LoraRegistry } from './lora-registry.js';
import type { KvEventSink, KvSpill, PagePool } from '../pages/index.js';
import { Scheduler, type SchedulerEvent, type SpecOptions } from '../scheduler/index.js';
import {
  EngineLoop,
  type MaxStepMs,
  type StepRunner,
  promptLogprobsFor,
  type PromptLogprobs,
} from '../engine/index.js';
import { schedulerFor } from './scheduler-for.js';
import { loopHealth, poolHealth, speculationHealth } from './health.js';
import { nodePageMap, speculationView } from './page-map.js';
import { constraintFor, prepareConstraints } from './constraints.js';

/** What the worker needs of a tokenizer (src/tokenizer's Tokenizer, structurally). */
export interface WorkerTokenizer {
  createDetokenizer(options: {
    readonly contextIds?: readonly number[];
    readonly skipSpecialTokens?: boolean;
  }): Detokenizer;
}

export interface ColocatedWorkerOptions {
  /** The engine's LoRA control: with it the worker serves adapters (`adapters`, --lora, admin loads). */
  readonly lora?: LoraControl;
  /** The name clients pass as `model`. */
  readonly modelName: string;
  /** Where the weights came from, shown as `root` in /v1/models. */
  readonly root: string;
  readonly contextLength: number;
  /** The engine's pool; its ledger is the one truth about pages. */
  readonly pool: PagePool;
  readonly runner: StepRunner;
  readonly sampler: TokenSampler;
  readonly tokenizer: WorkerTokenizer;
  /** The answers' text keeps special tokens (the gpt-oss reasoning parser reads harmony's channels from them). Default: skipped. */
  readonly keepSpecialTokens?: boolean;
  readonly eosTokenIds: readonly number[];
  readonly maxRunningRequests: number;
  readonly chunkedPrefillSize: number;
  /** Logits rows a step gives prompt log-probabilities beyond one per request (core's PROMPT_LOGIT_ROWS); default 0. */
  readonly promptLogitRows?: number;
  /** The time budget of a step with decodes (--max-step-ms; default 'auto'). */
  readonly maxStepMs?: MaxStepMs;
  /** Prompt-lookup speculative decoding (--spec-max-draft; scheduler/spec-lookup.ts); absent: off. */
  readonly speculation?: SpecOptions;
  /** A draft model for speculation (--draft-model; draft-model.ts; speculation.drafter 'model'); absent: prompt lookup. */
  readonly drafter?: { readonly name: string; readonly model: DraftModel };
  readonly maxWaiting: number;
  readonly faults: FaultSet;
  /** Integrity after every step (tests); otherwise only when idle. */
  readonly checkEveryStep: boolean;
  /** Extra fields for /health (e.g. the kernels in use). */
  readonly healthDetail?: Readonly<Record<string, unknown>>;
  /** The loop stopped on a bug. Default: report on stderr. */
  readonly onFatal?: (error: unknown) => void;
  /** Structured output (requests with a `constraint`); absent: such requests are refused. */
  readonly grammar?: GrammarEngine;
  /** The disk tier under the prefix cache (--kv-disk; scheduler-for.ts). */
  readonly kvSpill?: KvSpill;
  /** Where the prefix cache publishes KV events (serve's /kv-events ring; scheduler-for.ts). */
  readonly kvEvents?: KvEventSink;
}

interface Live {
  readonly request: GenerateRequest;
  readonly output: TextOutput;
  readonly detach: () => void;
  /** Structured output: the request's grammar state, told every token it emits. */
  readonly constraint?: TokenConstraint;
  /** sampling.promptLogprobs: filled by the prompt's chunks, sent with the first token. */
  readonly prompt?: PromptLogprobs;
  /** An embedding request's hidden state, taken after its last chunk (embeddings.ts). */
  embedding?: Float32Array;
}

export class ColocatedWorker {
  readonly modelName: string;
  readonly root: string;
  readonly contextLength: number;
  /** It answers embedding requests (GenerateRequest.embed): /v1/embeddings is served. */
  readonly embeddings = true;
  readonly adapters?: LoraRegistry;
  readonly scheduler: Scheduler;
  readonly pool: PagePool;
  readonly #o: ColocatedWorkerOptions;
  readonly #loop: EngineLoop;
  readonly #live = new Map<RequestId, Live>();
  #closed = false;

  constructor(options: ColocatedWorkerOptions) {
    const { pool, faults } = options;
    this.#o = options;
    this.modelName = options.modelName;
    this.root = options.root;
    this.contextLength = options.contextLength;
    this.pool = pool;
    this.scheduler = schedulerFor('colocated', options);
    if (options.lora !== undefined) this.adapters = new LoraRegistry(options.lora, (name) => this.adapterInUse(name));
    this.#loop = new EngineLoop({
      scheduler: this.scheduler,
      runner: options.runner,
      sampler: options.sampler,
      samplingOf: (rid) => this.#samplingOf(rid),
      promptLogprobsOf: (rid) => this.#promptLogprobsOf(rid),
      onHiddenState: (rid, hidden) => {
        const live = this.#live.get(rid);
        if (live?.request.embed === true) live.embedding = hidden;
      },
      onEvents: (events) => this.#onEvents(events),
      onFatal: (error) => this.#onFatal(error),
      prepareSampling: (items) => prepareConstraints(items, (rid) => this.#live.get(rid)?.constraint),
      faults,
      checkEveryStep: options.checkEveryStep,
      ...(options.maxStepMs === undefined ? {} : { maxStepMs: options.maxStepMs }),
      pool, // speculation's rollback of rejected drafts (spec-verify.ts)
      ...(options.drafter === undefined ? {} : { drafter: options.drafter.model }),
    });
    this.#loop.start();
  }

  generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
    const channel = new EventChannel(() => this.#abort(request.rid, new AbortedError('the reader stopped reading')));
    const refusal = this.#closed
      ? new TesseraError('overloaded', 'The server is shutting down.')
      : !this.#loop.healthy
        ? new InvariantError('the worker stopped after an internal error; see the server log')
        : signal.aborted
          ? abortedBy(signal)
          : undefined;
    if (refusal !== undefined) {
      channel.push({ type: 'failed', error: refusal });
      return channel;
    }
    const constraint = constraintFor(request, this.#o.grammar);
    if (constraint instanceof TesseraError) {
      channel.push({ type: 'failed', error: constraint });
      return channel;
    }
    // The adapter joins the tenant as KV's owner: its cached prefixes are its own (kvTenantOf).
    const dropAdapter = this.#o.faults.has('lora-drop-from-key');
    const admitted = this.scheduler.admit({
      ...request,
      tenant: kvTenantOf(request.tenant, request.adapter, dropAdapter),
    });
    if (admitted.kind === 'rejected') {
      constraint?.dispose();
      channel.push({ type: 'failed', error: admitted.error });
      return channel;
    }
    const onAbort = (): void => this.#abort(request.rid, abortedBy(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    const detokenizer = this.#o.tokenizer.createDetokenizer({
      contextIds: request.promptTokens,
      skipSpecialTokens: this.#o.keepSpecialTokens !== true,
    });
    const output = new TextOutput(channel, new TextStream(detokenizer, request.sampling.stop));
    const topN = request.sampling.promptLogprobs;
    const prompt = topN === undefined ? undefined : promptLogprobsFor(request.promptTokens, topN);
    // The record goes out with the first token, by which time every prompt chunk filled it.
    if (prompt !== undefined) output.promptLogprobs(prompt.logprobs);
    this.#live.set(request.rid, {
      request,
      output,
      detach: () => signal.removeEventListener('abort', onAbort),
      ...(constraint === undefined ? {} : { constraint }),
      ...(prompt === undefined ? {} : { prompt }),
    });
    this.#loop.wake();
    return channel;
  }

  /** Live requests running with the adapter `name` (an adapter in use is not unloaded). */
  adapterInUse(name: string): number {
    let n = 0;
    for (const live of this.#live.values()) if (live.request.adapter?.name === name) n++;
    return n;
  }

  async health(): Promise<BackendHealth> {
    const loop = this.#loop.stats;
    return {
      healthy: this.#loop.healthy && !this.#closed,
      detail: {
        role: 'colocated',
        model: this.modelName,
        ...poolHealth(this.pool),
        idle: this.scheduler.isIdle,
        ...loopHealth(loop, this.#o.checkEveryStep),
        ...speculationHealth(
          this.scheduler.specStats,
          this.#loop.numRolledBack,
          this.#o.drafter === undefined
            ? undefined
            : { name: this.#o.drafter.name, stats: this.#o.drafter.model.stats },
        ),
        ...this.#o.healthDetail,
      },
    };
  }

  async stats(): Promise<BackendStats> {
    return {
      kvPages: this.pool.ledger.counts(),
      requestsRunning: this.scheduler.numRunning,
      requestsWaiting: this.scheduler.numWaiting,
      tagMismatchesTotal: this.pool.numCheckFailures,
      specDraftTokensTotal: this.scheduler.specStats.numDrafted,
      specAcceptedTokensTotal: this.scheduler.specStats.numAccepted,
    };
  }

  /** The operator's page map (admin-only /dashboard). */
  async pageMap(): Promise<NodePageMap> {
    return nodePageMap({
      role: 'colocated',
      node: 'colocated',
      pool: this.pool,
      loop: this.#loop.stats,
      running: this.scheduler.numRunning,
      waiting: this.scheduler.numWaiting,
      transfers: [],
      quarantined: [],
      totals: { 'tag mismatches': this.pool.numCheckFailures },
      ...(this.#o.speculation === undefined || this.#o.speculation.maxDraft === 0
        ? {}
        : {
            speculation: speculationView(
              this.scheduler.specStats,
              this.#loop.numRolledBack,
              this.#o.drafter?.model.stats,
            ),
          }),
    });
  }

  /** Refuses new requests, aborts the live ones (their pages return) and stops the loop. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const rid of [...this.#live.keys()]) this.#abort(rid, new AbortedError('server shutting down'));
    await this.#loop.close();
  }

  #samplingOf(rid: RequestId): SamplingState | undefined {
    const live = this.#live.get(rid);
    const view = this.scheduler.view(rid);
    if (live === undefined || view === undefined || view.state === 'ending') return undefined;
    const { constraint } = live;
    return {
      params: live.request.sampling,
      numOutputTokens: view.numOutputTokens,
      outputTokens: () => this.scheduler.outputTokens(rid),
      ...(constraint === undefined
        ? {}
        : { mask: () => constraint.mask(), draftMasks: (drafts) => constraint.draftMasks(drafts) }),
    };
  }

  #promptLogprobsOf(rid: RequestId): { readonly record: PromptLogprobs; readonly numTokens: number } | undefined {
    const record = this.#live.get(rid)?.prompt;
    const view = this.scheduler.view(rid);
    if (record === undefined || view === undefined || view.state === 'ending') return undefined;
    return { record, numTokens: view.numPromptTokens + view.numOutputTokens };
  }

  #abort(rid: RequestId, error: TesseraError): void {
    const live = this.#live.get(rid);
    if (live === undefined) return;
    this.scheduler.abort(rid);
    this.#end(rid, live).failed(error);
    this.#loop.wake(); // pages came back: a waiting request may fit now
  }

  #onEvents(events: readonly SchedulerEvent[]): void {
    // Requests that end in this batch get their held-back text with their last token.
    const ending = new Set(events.flatMap((e) => (e.kind === 'finished' ? [e.rid] : [])));
    for (const event of events) {
      const live = this.#live.get(event.rid);
      if (live === undefined) continue; // ended already (aborted, or stopped by a stop string)
      switch (event.kind) {
        case 'token':
          this.#onToken(event.rid, live, event.token, event.logprob, ending.has(event.rid));
          break;
        case 'finished':
          this.#end(event.rid, live).finished(event.finishReason, event.usage, live.embedding);
          break;
        case 'failed':
          this.#end(event.rid, live).failed(event.error);
          break;
        case 'prefilled':
          throw new InvariantError(`a co-located scheduler reported ${event.rid} prefilled`);
        default:
          assertNever(event, 'scheduler event');
      }
    }
  }

  #onToken(rid: RequestId, live: Live, token: number, logprob: TokenLogprob | undefined, isLast: boolean): void {
    live.constraint?.accept(token);
    if (live.output.tokens([token], logprob === undefined ? [] : [logprob], isLast) === 'more') return;
    // A stop string matched at `token`: the text before it is out; end the request as stopped.
    const finish = this.scheduler.finish(rid, 'stop');
    // not-found: it ends in this same batch of events; its `finished` comes next and says 'stop'.
    if (finish.kind === 'finished' && finish.event.kind === 'finished')
      this.#end(rid, live).finished('stop', finish.event.usage);
  }

  /** The request leaves the live set; its output takes the terminal event. */
  #end(rid: RequestId, live: Live): TextOutput {
    this.#live.delete(rid);
    live.detach();
    live.constraint?.dispose();
    return live.output;
  }

  #onFatal(error: unknown): void {
    const failure = new InvariantError('the worker stopped after an internal error', error);
    for (const [rid, live] of [...this.#live]) this.#end(rid, live).failed(failure);
    (
      this.#o.onFatal ??
      ((e: unknown) =>
        process.stderr.write(`tessera worker: fatal: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`))
    )(error);
  }
}

function abortedBy(signal: AbortSignal): TesseraError {
  const reason: unknown = signal.reason;
  return reason instanceof TesseraError ? reason : new AbortedError('client disconnected');
}
