// Scheduler: the requests of one worker, and which of them run in each model step.
// Owns: the public verbs and their order: admission before any page is touched, the step
// protocol (schedule/complete), deferring the end of a request whose step is in flight, and the
// role-specific verbs. The records and their transitions live in book.ts, planning in plan.ts.
// Must never: read a clock or randomness (time, if ever needed, is an argument), touch page
// data or stamps (the runner does, and reports back), free a page a step may still be writing
// (a request ended mid-step keeps its pages until complete()), or free a page a peer may still
// write (abort with 'peer-may-write' quarantines; release() frees after the peer's AbortAck).
//
// The step loop a worker runs (timing, TTFT and latencies are the worker's: it sees every event
// when it happens; the scheduler keeps no clock):
//   1. plan = schedule()                 items to run; nothing runs when plan.items is empty
//   2. the runner checks and runs plan.items, stamps what it wrote, samples where wantLogits
//   3. events = complete(results)        one result per item: tokens, finishes, failures
//   4. the worker streams events; stop strings it finds end a request with finish(rid, 'stop')
// admit / reserve / startDecode / abort / finish / release may come at any time, also between
// 1 and 3; schedule() and complete() strictly alternate.
import {
  assert,
  assertNever,
  ConfigError,
  InvalidRequestError,
  InvariantError,
  TesseraError,
  TransferError,
  type BatchItem,
  type FinishReason,
  type GenerateRequest,
  type RequestId,
  type Tag,
  type TenantId,
} from '../core/index.js';
import {
  admissionError,
  pagesFor,
  requestShapeError,
  type AdmissionLimits,
  type PagePool,
  type PrefixCache,
} from '../pages/index.js';
import { finishedEvent, RequestBook } from './book.js';
import { checkSchedulerIntegrity } from './integrity.js';
import { PageOps } from './page-ops.js';
import { planStep } from './plan.js';
import type { PrefillLimit } from './step-budget.js';
import { slotsOfPage, viewOf, type PageTable, type SchedRequest } from './request-state.js';
import type { DraftCandidate } from './spec-lookup.js';
import type {
  AbortResult,
  AdmitResult,
  FinishResult,
  ReleaseResult,
  RequestView,
  ReserveResult,
  Role,
  SchedulerEvent,
  SchedulerOptions,
  StartDecodeResult,
  StepPlan,
  StepResult,
  DraftVerdict,
} from './types.js';

/** Whether a peer (the prefill node feeding a decode node) may still write the aborted request's pages. */
export type PeerWrites = 'no-peer-writes' | 'peer-may-write';

export class Scheduler {
  readonly role: Role;
  readonly #options: SchedulerOptions;
  readonly #pool: PagePool;
  readonly #prefixCache: PrefixCache | undefined;
  readonly #pages: PageOps;
  readonly #book: RequestBook;
  /** The items of the step being run, between schedule() and complete(). */
  #inFlight: ReadonlyMap<RequestId, BatchItem> | undefined;
  #numPreemptions = 0;
  #numDrafted = 0;
  #numAccepted = 0;
  /** Plans left in which the node counts as shared by several tenants (SHARED_WINDOW_STEPS after the last). */
  #sharedStepsLeft = 0;
  /** Milliseconds of steps left in which it still counts as shared (SHARED_WINDOW_MS after the last; observeStepCost counts them down). */
  #sharedMsLeft = 0;

  constructor(options: SchedulerOptions) {
    const { pool, pageSize, contextLength, maxRunningRequests, chunkedPrefillSize, maxWaiting } = options;
    const positive = (value: number, name: string): void => {
      if (!Number.isSafeInteger(value) || value < 1)
        throw new ConfigError(`${name} must be a positive integer, got ${value}`);
    };
    positive(contextLength, 'contextLength');
    positive(maxRunningRequests, 'maxRunningRequests');
    positive(chunkedPrefillSize, 'chunkedPrefillSize');
    positive(maxWaiting, 'maxWaiting');
    if (pageSize !== pool.pageSize)
      throw new ConfigError(`pageSize is ${pageSize}, but the pool's pages hold ${pool.pageSize} tokens`);
    if (chunkedPrefillSize < maxRunningRequests) {
      throw new ConfigError(
        `chunkedPrefillSize (${chunkedPrefillSize}) must be at least maxRunningRequests (${maxRunningRequests}), so every running request can decode in every step`,
      );
    }
    this.role = options.role;
    this.#options = options;
    this.#pool = pool;
    this.#prefixCache = options.prefixCache;
    this.#pages = new PageOps(pool, options.prefixCache);
    this.#book = new RequestBook(
      this.#pages,
      options.role,
      options.faults,
      options.eosTokenIds ?? [],
      options.fairShare,
      options.speculation,
    );
  }

  /** Requests prefilling or decoding. */
  /** This node's tenant-scoped prefix cache (co-located and prefill), for what the node reports of it. */
  get prefixCache(): PrefixCache | undefined {
    return this.#prefixCache;
  }

  /** A tenant's virtual token counter (fair-share.ts): the service it got, weighted; for metrics and tests. */
  tenantCounter(tenant: TenantId): number {
    return this.#book.counters.counterOf(tenant);
  }

  get numRunning(): number {
    return this.#book.running.length;
  }

  get numWaiting(): number {
    return this.#book.waiting.size;
  }

  /** Prefill role: requests whose pages are kept until decode acknowledges the transfer. */
  get numHeld(): number {
    return this.#book.count('held');
  }

  /** Decode role: requests whose prompt pages a peer is filling. */
  get numReceiving(): number {
    return this.#book.count('receiving');
  }

  /** Requests preempted so far (on a decode node: failed instead, see plan.ts). */
  get numPreemptions(): number {
    return this.#numPreemptions;
  }

  /** Aborted requests whose pages stay quarantined until release(rid). */
  get numQuarantined(): number {
    return this.#book.quarantined.size;
  }

  /** No request, no quarantine, no step in flight: every page is free or cached. */
  get isIdle(): boolean {
    return this.#book.requests.size === 0 && this.#book.quarantined.size === 0 && this.#inFlight === undefined;
  }

  /** Live requests (waiting, running, receiving or held) that run with the LoRA adapter `name`. */
  numWithAdapter(name: string): number {
    let n = 0;
    for (const r of this.#book.requests.values()) if (r.adapter === name) n++;
    return n;
  }

  view(rid: RequestId): RequestView | undefined {
    const r = this.#book.requests.get(rid);
    return r === undefined ? undefined : viewOf(r);
  }

  /** rid's output tokens so far (a copy; empty for a request this scheduler does not hold). */
  outputTokens(rid: RequestId): number[] {
    const r = this.#book.requests.get(rid);
    return r === undefined ? [] : r.tokens.slice(r.numPromptTokens);
  }

  /**
   * Co-located and prefill roles: admission, then the back of its tenant's queue. Refusals are
   * values (AdmissionError, InvalidRequestError, `overloaded`), decided before any page is touched.
   */
  admit(request: GenerateRequest): AdmitResult {
    assert(this.role !== 'decode', 'a decode node takes requests through reserve()');
    const error = this.#refusal(request) ?? this.#overloaded();
    if (error !== undefined) return { kind: 'rejected', error };
    this.#book.add(request, { kind: 'waiting' });
    return { kind: 'admitted' };
  }

  /**
   * Decode role: admission, then pages for the prompt (new epochs), which a peer fills. The tags
   * go to the prefill node; startDecode(rid, firstToken) once the transfer is verified.
   */
  reserve(request: GenerateRequest): ReserveResult {
    assert(this.role === 'decode', () => `reserve() is for a decode node; this one is ${this.role}`);
    const refusal = this.#refusal(request);
    if (refusal !== undefined) return { kind: 'rejected', error: refusal };
    const numReserved = this.#book.running.length + this.numReceiving;
    if (numReserved >= this.#options.maxRunningRequests) {
      return {
        kind: 'rejected',
        error: overloaded(
          `${numReserved} requests are running or receiving, the limit is ${this.#options.maxRunningRequests}`,
        ),
      };
    }
    const need = pagesFor(request.promptTokens.length, this.#pool.pageSize);
    // A decode node never recomputes, so a request it preempted would fail mid-stream: it takes a
    // request only when the pages its output may still need, and every taken one's, are there too.
    // (`skip-output-reservation`, test-only: the prompt's pages alone, as before.)
    const whole = this.#options.reserveOutputPages === true && !this.#options.faults.has('skip-output-reservation');
    const growth = whole
      ? pagesFor(request.promptTokens.length + request.sampling.maxTokens, this.#pool.pageSize) - need
      : 0;
    const owed = whole ? this.#pagesOwed() : 0;
    const room = this.#pages.available(need + growth + owed);
    const tags = room >= need + growth + owed ? this.#pages.allocate(need, request) : undefined;
    if (tags === undefined) {
      return {
        kind: 'rejected',
        error: overloaded(
          `no room for ${need} KV pages now (+${growth} for its output, ${owed} owed to running requests; ${room} free)`,
        ),
      };
    }
    this.#book.add(request, { kind: 'receiving', tags: [...tags] });
    return { kind: 'reserved', tags };
  }

  /** Decode role: pages the receiving and decoding requests may still allocate before they end. */
  #pagesOwed(): number {
    let owed = 0;
    for (const r of this.#book.requests.values()) {
      if (r.state.kind !== 'receiving' && r.state.kind !== 'decoding') continue;
      const held = r.state.kind === 'receiving' ? r.state.tags.length : r.state.table.tags.length;
      owed += Math.max(0, pagesFor(r.numPromptTokens + r.maxTokens, this.#pool.pageSize) - held);
    }
    return owed;
  }

  /**
   * Decode role: the peer's transfer into rid's pages is complete and verified. The stamps must
   * cover every prompt position (the incident's placeholder bug fails here: the request fails
   * with a TransferError and nothing is read); then the request decodes from its first token,
   * which gets no `token` event (the DecodeMachine sent it): the events are an end, if any.
   */
  startDecode(rid: RequestId, firstToken: number): StartDecodeResult {
    const r = this.#book.requests.get(rid);
    if (r === undefined) return { kind: 'not-found' };
    if (r.state.kind !== 'receiving') throw new InvariantError(`startDecode: ${rid} is ${r.state.kind}, not receiving`);
    const tags = r.state.tags;
    const uncovered = this.#options.faults.has('skip-page-check')
      ? undefined
      : this.#firstUncovered(tags, r.numPromptTokens);
    if (uncovered !== undefined) {
      const slots = slotsOfPage(uncovered, r.numPromptTokens, this.#pool.pageSize);
      const tag = tags[uncovered] as Tag;
      const stamp = this.#pool.stampOf(tag.page);
      const error = new TransferError(
        `the KV transfer did not cover the prompt: page ${uncovered} (page ${tag.page}, epoch ${tag.epoch}) should hold ${slots} slot(s), ` +
          `its stamp says ${stamp.filledSlots} in epoch ${stamp.epoch}; decoding did not start`,
      );
      return { kind: 'started', events: [this.#book.fail(r, error)] };
    }
    const table: PageTable = { tags: [...tags], numComputed: r.numPromptTokens };
    this.#book.setState(r, { kind: 'decoding', table });
    // One path for the first token: prefill sampled it, KvDone carried it, the DecodeMachine sends
    // it; here it is only the input of the next position (and may end the request), no event.
    return { kind: 'started', events: this.#book.onSampled(r, table, firstToken, undefined, 'silent') };
  }

  /**
   * Plans one step. Call complete() with the results before the next schedule(). `prefillLimit`:
   * how much prefill may join a step with decodes (the worker's StepBudget); default: the token budget.
   */
  schedule(prefillLimit?: PrefillLimit): StepPlan {
    assert(this.#inFlight === undefined, 'schedule() while the previous step is still running; call complete() first');
    const plan = planStep({
      pages: this.#pages,
      running: this.#book.running,
      waiting: this.#book.waiting,
      role: this.role,
      pageSize: this.#pool.pageSize,
      contextLength: this.#options.contextLength,
      maxRunningRequests: this.#options.maxRunningRequests,
      chunkedPrefillSize: this.#options.chunkedPrefillSize,
      promptLogitRows: this.#options.promptLogitRows ?? 0,
      numReserved: this.numReceiving,
      othersHoldPages: this.numHeld + this.numReceiving + this.#book.quarantined.size > 0,
      ...(prefillLimit === undefined ? {} : { prefillLimit }),
      splitShortPrompts: this.#options.faults.has('split-short-prompts'),
      shared: this.#shared(),
      crowdFirstTokenSteps: this.#options.faults.has('crowded-first-token-step'),
      looseSharedBudget: this.#options.faults.has('loose-shared-budget'),
      budgetClosesAdmission: this.#options.faults.has('budget-closes-admission'),
      ...(this.#options.speculation === undefined || this.#options.speculation.maxDraft === 0
        ? {}
        : { speculation: this.#options.speculation }),
      ...(this.#options.faults.has('no-tenant-fairness') ? {} : { counters: this.#book.counters }),
      start: (r, table) => this.#book.setState(r, { kind: 'prefilling', table }),
      preempt: (r) => this.#book.preempt(r),
      fail: (r, error) => this.#book.fail(r, error),
      failOnPreempt: this.role === 'decode',
      failPreempted: (r) => {
        this.#numPreemptions++;
        return this.#book.fail(r, preemptedOnDecode(r.rid));
      },
    });
    this.#numPreemptions += plan.preempted.length;
    if (plan.items.length > 0) this.#inFlight = new Map(plan.items.map((item) => [item.rid, item]));
    return plan;
  }

  /**
   * Whether several tenants share the node for this plan: two or more have requests now, or had
   * within the last SHARED_WINDOW_STEPS plans and SHARED_WINDOW_MS of steps (a tenant between two
   * of its requests, whose next arrives a while after its last ended, still counts). Co-located
   * and prefill nodes: on a prefill node another tenant's short prompt waits out the chunk in
   * flight too, and a whole 256-token chunk there was most of its time to first token through a
   * cluster (bench:fair --target up, loaded machine: B's p50 17x alone with whole chunks, 1.65x
   * budgeted; A's prefill throughput pays while B is active). A decode node never prefills.
   * The window is also in step time because on a prefill node B's request leaves with its prompt:
   * the node sees A alone for all of B's decode and B's client's turn, and 16 shared plans
   * (~10 ms each on m100) were over before B's next request came (bench:fair --target up
   * --breakdown, traced: the plan count ran out 155 ms after B's last request left, the next step
   * was a whole 256-token chunk of 160 ms, and B's next request waited it out: 175 ms on the
   * prefill node against ~16 alone, the p99). Fault `plan-count-shared-window`: plans only.
   * Fault `unbounded-shared-steps`: never.
   */
  #shared(): boolean {
    if (this.role === 'decode' || this.#options.faults.has('unbounded-shared-steps')) return false;
    if (this.#book.counters.numActive >= 2) {
      this.#sharedStepsLeft = SHARED_WINDOW_STEPS;
      this.#sharedMsLeft = this.#options.faults.has('plan-count-shared-window') ? 0 : SHARED_WINDOW_MS;
    } else if (this.#sharedStepsLeft > 0) this.#sharedStepsLeft--;
    return this.#sharedStepsLeft > 0 || this.#sharedMsLeft > 0;
  }

  /** The runner's results for the step in flight, one per item; returns what happened. */
  complete(results: readonly StepResult[]): SchedulerEvent[] {
    const inFlight = this.#inFlight;
    assert(inFlight !== undefined, 'complete() without a step in flight');
    assert(
      results.length === inFlight.size && new Set(results.map((x) => x.rid)).size === results.length,
      () => `complete(): ${results.length} results for ${inFlight.size} items`,
    );
    this.#inFlight = undefined;
    const events: SchedulerEvent[] = [];
    for (const result of results) {
      const item = inFlight.get(result.rid);
      const r = this.#book.requests.get(result.rid);
      assert(item !== undefined && r !== undefined, () => `complete(): ${result.rid} was not in the step`);
      const state = r.state;
      switch (state.kind) {
        case 'ending':
          this.#book.endAfterStep(r, state);
          break;
        case 'prefilling':
        case 'decoding':
          events.push(...this.#apply(r, state.table, item, result));
          break;
        case 'waiting':
        case 'receiving':
        case 'held':
          throw new InvariantError(`complete(): ${r.rid} was in the step but is ${state.kind}`);
        default:
          assertNever(state, 'request state');
      }
    }
    return events;
  }

  /** Ends a request as finished (a stop string the worker found); its computed full pages go to the prefix cache. */
  finish(rid: RequestId, finishReason: FinishReason): FinishResult {
    const r = this.#book.requests.get(rid);
    if (r === undefined) return { kind: 'not-found' };
    const state = r.state;
    switch (state.kind) {
      case 'waiting':
      case 'prefilling':
      case 'decoding':
        if (state.kind !== 'waiting' && this.#inFlight?.has(rid) === true) {
          this.#book.setState(r, { kind: 'ending', table: state.table, ending: { kind: 'finished' } });
          return { kind: 'finished', event: finishedEvent(r, finishReason) };
        }
        return { kind: 'finished', event: this.#book.finish(r, finishReason) };
      case 'ending':
        return { kind: 'not-found' };
      case 'receiving':
      case 'held':
        throw new InvariantError(`finish: ${rid} is ${state.kind}; only a request that generates can finish`);
      default:
        return assertNever(state, 'request state');
    }
  }

  /**
   * Ends a request in any state; its pages come back, or are quarantined when a peer may still
   * write them. Unknown, ended or already aborted requests are reported as `not-found`.
   */
  abort(rid: RequestId, peer: PeerWrites = 'no-peer-writes'): AbortResult {
    const r = this.#book.requests.get(rid);
    if (r === undefined) return { kind: 'not-found' };
    const state = r.state;
    const peerMayWrite = peer === 'peer-may-write';
    switch (state.kind) {
      case 'prefilling':
      case 'decoding':
        if (this.#inFlight?.has(rid) === true) {
          this.#book.setState(r, { kind: 'ending', table: state.table, ending: { kind: 'aborted', peerMayWrite } });
          return { kind: 'aborted', was: state.kind, pages: peerMayWrite ? 'after-peer' : 'after-step' };
        }
        return { kind: 'aborted', was: state.kind, pages: this.#book.giveBack(r, peerMayWrite) };
      case 'waiting':
      case 'receiving':
      case 'held':
        return { kind: 'aborted', was: state.kind, pages: this.#book.giveBack(r, peerMayWrite) };
      case 'ending':
        return { kind: 'not-found' };
      default:
        return assertNever(state, 'request state');
    }
  }

  /**
   * The peer is done with rid's pages. Prefill role: decode acknowledged the transfer, the held
   * pages go to the prefix cache or are freed. Any role: an aborted request's quarantined pages are
   * freed after the peer's AbortAck or the close of its connection.
   */
  release(rid: RequestId): ReleaseResult {
    const numQuarantined = this.#book.releaseQuarantine(rid);
    if (numQuarantined !== undefined) return { kind: 'released', numPages: numQuarantined };
    const r = this.#book.requests.get(rid);
    if (r === undefined) return { kind: 'not-found' };
    if (r.state.kind !== 'held')
      throw new InvariantError(`release: ${rid} is ${r.state.kind}, not held or quarantined`);
    return { kind: 'released', numPages: this.#book.releaseHeld(r) };
  }

  /** The scheduler agrees with the ledger and the stamps (see integrity.ts); throws InvariantError. */
  checkIntegrity(): void {
    this.#book.waiting.checkIntegrity();
    checkSchedulerIntegrity({
      pool: this.#pool,
      prefixCache: this.#prefixCache,
      maxRunningRequests: this.#options.maxRunningRequests,
      requests: this.#book.requests,
      running: this.#book.running,
      waiting: this.#book.waiting.toArray(),
      quarantined: this.#book.quarantined,
      inFlight: this.#inFlight,
    });
  }

  #refusal(request: GenerateRequest): TesseraError | undefined {
    if (this.#book.has(request.rid)) {
      return new InvalidRequestError(`request id ${request.rid} is already in use on this node`);
    }
    const numPromptTokens = request.promptTokens.length;
    const { maxTokens } = request.sampling;
    if (this.#options.faults.has('skip-admission')) return requestShapeError(numPromptTokens, maxTokens);
    return admissionError(this.#limits(), this.role, numPromptTokens, maxTokens);
  }

  #limits(): AdmissionLimits {
    return {
      contextLength: this.#options.contextLength,
      pageSize: this.#pool.pageSize,
      numPages: this.#pages.numPages,
    };
  }

  #overloaded(): TesseraError | undefined {
    const max = this.#options.maxWaiting;
    return this.#book.waiting.size >= max
      ? overloaded(`${this.#book.waiting.size} requests are waiting, the limit is ${max}`)
      : undefined;
  }

  #apply(r: SchedRequest, table: PageTable, item: BatchItem, result: StepResult): SchedulerEvent[] {
    assert(
      item.startPos === table.numComputed,
      () => `${r.rid}: the item started at ${item.startPos}, the table is at ${table.numComputed}`,
    );
    switch (result.kind) {
      case 'failed':
        return [this.#book.fail(r, result.error)];
      case 'computed':
        assert(
          !item.wantLogits ||
            item.hiddenOut === true ||
            (item.promptRows === true && table.numComputed + item.tokens.length < r.tokens.length),
          () => `${r.rid}: the runner computed an item that wanted logits, without a token`,
        );
        table.numComputed += item.tokens.length;
        // An embedding request ends with its prompt: the worker took its hidden state; pages go back (cached).
        if (item.hiddenOut === true) return [this.#book.finish(r, 'length')];
        return [];
      case 'sampled':
        assert(item.wantLogits, () => `${r.rid}: the runner sampled from an item that wanted no logits`);
        if (result.drafts !== undefined) return this.#applyDrafts(r, table, item, result, result.drafts);
        table.numComputed += item.tokens.length;
        return this.#book.onSampled(r, table, result.token, result.logprob);
      default:
        return assertNever(result, 'step result');
    }
  }

  /**
   * A verified speculative decode: the fed token and the accepted drafts are computed (the worker
   * rolled the rejected positions' stamps back already), each accepted draft is an output token,
   * then the token sampled after them; a stop token or max_tokens among them ends the request there.
   */
  #applyDrafts(
    r: SchedRequest,
    table: PageTable,
    item: BatchItem,
    result: Extract<StepResult, { kind: 'sampled' }>,
    drafts: DraftVerdict,
  ): SchedulerEvent[] {
    const numAccepted = drafts.accepted.length;
    assert(
      drafts.numDrafted === item.tokens.length - 1 && numAccepted <= drafts.numDrafted && r.draft !== undefined,
      () => `${r.rid}: a verdict on ${drafts.numDrafted} drafts for an item of ${item.tokens.length} tokens`,
    );
    r.draft.observe(drafts.numDrafted, numAccepted);
    this.#numDrafted += drafts.numDrafted;
    this.#numAccepted += numAccepted;
    table.numComputed += 1; // the fed token
    const events: SchedulerEvent[] = [];
    for (const { token, logprob } of drafts.accepted) {
      events.push(...this.#book.onSampled(r, table, token, logprob));
      if (r.state.kind !== 'decoding') return events; // it ended on this token
      table.numComputed += 1; // an accepted draft's K/V is computed: its position was verified
    }
    events.push(...this.#book.onSampled(r, table, result.token, result.logprob));
    return events;
  }

  /**
   * A step the worker ran: its tokens over all items, attention pairs and milliseconds, for the
   * cost of verifying drafts (spec-cost.ts; nothing without speculation), and for the shared
   * window's step time (#shared).
   */
  observeStepCost(numTokens: number, ms: number, numPairs: number): void {
    // The shared window's step time runs only while no second tenant is here (#shared sets it again).
    if (this.#book.counters.numActive < 2 && ms > 0) this.#sharedMsLeft = Math.max(0, this.#sharedMsLeft - ms);
    this.#book.specCost?.observe(numTokens, ms, numPairs);
  }

  /** A batch-1 plain decode step's ms by the measured steps' fit (spec-cost.ts); undefined until fitted or without speculation. */
  get plainStepMs(): number | undefined {
    return this.#book.specCost?.plainMs();
  }

  /** C(k): a batch-1 step verifying k drafts against a plain one by the same fit (spec-cost.ts); undefined likewise. */
  verifyCostRatio(k: number): number | undefined {
    return this.#book.specCost?.ratio(k);
  }

  /** Speculation so far: draft tokens verified and accepted over every request. */
  get specStats(): { readonly numDrafted: number; readonly numAccepted: number } {
    return { numDrafted: this.#numDrafted, numAccepted: this.#numAccepted };
  }

  /**
   * The decoding requests, in start order, and how many decode in all: a draft model drafts for
   * the speculating ones before the step that plans them (engine/draft-model.ts). Read only.
   */
  get decodingDrafts(): { readonly numDecoding: number; readonly drafting: readonly DraftCandidate[] } {
    const drafting: DraftCandidate[] = [];
    let numDecoding = 0;
    for (const r of this.#book.running) {
      if (r.state.kind !== 'decoding') continue;
      numDecoding++;
      if (r.draft !== undefined) drafting.push(r as DraftCandidate);
    }
    return { numDecoding, drafting };
  }

  #firstUncovered(tags: readonly Tag[], numTokens: number): number | undefined {
    for (let i = 0; i < pagesFor(numTokens, this.#pool.pageSize); i++) {
      if (!this.#pages.isWritten(tags[i] as Tag, slotsOfPage(i, numTokens, this.#pool.pageSize))) return i;
    }
    return undefined;
  }
}

/** Plans after the last moment two tenants had requests here during which steps without decodes stay budgeted. */
export const SHARED_WINDOW_STEPS = 16;

/**
 * Milliseconds of steps after the last moment two tenants had requests here during which steps
 * stay budgeted too (with SHARED_WINDOW_STEPS: the longer of the two). Measured on bench:fair
 * --target up (quiet 2-core machine): B's next request reached the prefill node 50-265 ms after
 * its last left; a second covers that with room for a loaded machine, and costs a tenant left
 * alone at most a second of shared steps.
 */
export const SHARED_WINDOW_MS = 1000;

/** A decode node cannot recompute a prompt it never saw: the request it would preempt fails. */
function preemptedOnDecode(rid: RequestId): TesseraError {
  return new TesseraError(
    'overloaded',
    `This decode node ran out of KV pages for ${rid}'s output and would have had to preempt it; a decode node cannot recompute a prompt it never saw, so the request fails. Please retry.`,
  );
}

function overloaded(why: string): TesseraError {
  return new TesseraError('overloaded', `This node is overloaded (${why}); please retry later.`);
}
