// RequestBook: the scheduler's records of its requests, and every way a request changes state
// or ends, with the pages that move when it does. Scheduler decides *when* (its public verbs and
// the step protocol); the book does the moving, so the records and the ledger move together.
// Owns: the request map, the running set (start order), the waiting queues, quarantine records.
// Must never: decide what runs (plan.ts), free pages of a request whose step is in flight (the
// scheduler defers those to complete()), or free pages a peer may write ('free-before-ack' aside,
// the fault that is the negative control for exactly that).
import {
  assert,
  assertNever,
  type FaultSet,
  type FinishReason,
  type GenerateRequest,
  type RequestId,
  type TesseraError,
  type TokenLogprob,
} from '../core/index.js';
import type { QuarantineRecord } from './integrity.js';
import { DEFAULT_FAIR_SHARE, TenantCounters, type FairShareWeights } from './fair-share.js';
import type { PageOps } from './page-ops.js';
import { TenantQueues } from './queue.js';
import { SpecCost } from './spec-cost.js';
import { DraftState, type SpecOptions } from './spec-lookup.js';
import {
  computedTokens,
  numOutputTokens,
  tagsOf,
  type PageTable,
  type RequestState,
  type SchedRequest,
} from './request-state.js';
import type { Role, SchedulerEvent } from './types.js';

export class RequestBook {
  readonly requests = new Map<RequestId, SchedRequest>();
  /** Prefilling and decoding requests in the order they started: preemption takes the last. */
  readonly running: SchedRequest[] = [];
  readonly waiting = new TenantQueues<SchedRequest>();
  /** Aborted requests whose pages a peer may still write, until release(). */
  readonly quarantined = new Map<RequestId, QuarantineRecord>();
  /** The tenants' virtual token counters: a tenant is active from its first request's add to its last's end. */
  readonly counters: TenantCounters;
  readonly #pages: PageOps;
  readonly #role: Role;
  readonly #faults: FaultSet;
  readonly #eosTokenIds: readonly number[];
  /** Prompt-lookup speculation for decoding requests (constrained ones too: their masks follow the drafts); none: off. */
  readonly #speculation: SpecOptions | undefined;
  /** The measured step costs every request's draft length reads (spec-cost.ts); none without speculation. */
  readonly specCost: SpecCost | undefined;

  constructor(
    pages: PageOps,
    role: Role,
    faults: FaultSet,
    eosTokenIds: readonly number[],
    weights: FairShareWeights = DEFAULT_FAIR_SHARE,
    speculation?: SpecOptions,
  ) {
    this.#speculation = speculation !== undefined && speculation.maxDraft > 0 ? speculation : undefined;
    this.specCost = this.#speculation === undefined ? undefined : new SpecCost();
    this.counters = new TenantCounters(weights);
    this.#pages = pages;
    this.#role = role;
    this.#faults = faults;
    this.#eosTokenIds = [...eosTokenIds];
  }

  /** In use by a live request or a quarantine record. */
  has(rid: RequestId): boolean {
    return this.requests.has(rid) || this.quarantined.has(rid);
  }

  count(kind: RequestState['kind']): number {
    let n = 0;
    for (const r of this.requests.values()) if (r.state.kind === kind) n++;
    return n;
  }

  /** A new request, waiting (back of its tenant's queue) or receiving (decode role). */
  add(request: GenerateRequest, state: Extract<RequestState, { kind: 'waiting' | 'receiving' }>): SchedRequest {
    const { sampling } = request;
    const r: SchedRequest = {
      rid: request.rid,
      tenant: request.tenant,
      numPromptTokens: request.promptTokens.length,
      maxTokens: sampling.maxTokens,
      stopTokenIds: new Set([...sampling.stopTokenIds, ...(sampling.ignoreEos ? [] : this.#eosTokenIds)]),
      tokens: [...request.promptTokens],
      promptLogprobs: sampling.promptLogprobs !== undefined,
      embed: request.embed === true,
      ...(request.adapter === undefined ? {} : { adapter: request.adapter.name }),
      numCachedTokens: 0,
      state,
      ...(this.#speculation !== undefined && this.#role !== 'prefill'
        ? // A decode node's prompt ids are placeholders: it drafts from the output alone.
          {
            draft: new DraftState(
              this.#speculation,
              this.#role === 'decode' ? request.promptTokens.length : 0,
              this.specCost,
            ),
          }
        : {}),
    };
    this.requests.set(r.rid, r);
    this.counters.join(r.tenant);
    if (state.kind === 'waiting') this.waiting.push(r);
    return r;
  }

  /** Moves r to `state`, keeping the running set exactly the prefilling and decoding requests. */
  setState(r: SchedRequest, state: RequestState): void {
    const wasRunning = isRunning(r.state);
    r.state = state;
    if (wasRunning && !isRunning(state)) this.#leaveRunning(r);
    else if (!wasRunning && isRunning(state)) this.running.push(r);
  }

  /** A token was sampled after the last computed position: hold (prefill role), finish, or decode on. */
  /**
   * A token sampled for r: its `token` event (left out with emit 'silent': decode's first token,
   * which prefill sampled and the DecodeMachine sends itself), and its end when it is one.
   */
  onSampled(
    r: SchedRequest,
    table: PageTable,
    token: number,
    logprob?: TokenLogprob,
    emit: 'emit' | 'silent' = 'emit',
  ): SchedulerEvent[] {
    if (this.#role === 'prefill') {
      this.setState(r, { kind: 'held', table, firstToken: token });
      return [
        {
          kind: 'prefilled',
          rid: r.rid,
          firstToken: token,
          ...(logprob === undefined ? {} : { firstLogprob: logprob }),
          tags: [...table.tags],
          numTokens: table.numComputed,
          ...(r.numCachedTokens > 0 ? { numCachedTokens: r.numCachedTokens } : {}),
        },
      ];
    }
    r.tokens.push(token);
    const events: SchedulerEvent[] =
      emit === 'silent' ? [] : [{ kind: 'token', rid: r.rid, token, ...(logprob === undefined ? {} : { logprob }) }];
    if (r.stopTokenIds.has(token)) events.push(this.finish(r, 'stop'));
    else if (numOutputTokens(r) >= r.maxTokens) events.push(this.finish(r, 'length'));
    else this.setState(r, { kind: 'decoding', table });
    return events;
  }

  /** Finished: full stamped pages of prompt and output into the prefix cache, the rest freed. */
  finish(r: SchedRequest, finishReason: FinishReason): SchedulerEvent {
    this.#pages.retire(r, computedTokens(r), tagsOf(r.state));
    this.#forget(r);
    return finishedEvent(r, finishReason);
  }

  /** Failed: pages freed, nothing cached. */
  fail(r: SchedRequest, error: TesseraError): SchedulerEvent {
    this.#pages.letGo(r, tagsOf(r.state));
    this.#forget(r);
    return { kind: 'failed', rid: r.rid, error };
  }

  /** Preempted: pages back (full stamped ones cached, so a recompute may hit them), front of its tenant's queue. */
  preempt(r: SchedRequest): void {
    this.#pages.retire(r, computedTokens(r), tagsOf(r.state));
    this.setState(r, { kind: 'waiting' });
    this.waiting.pushFront(r);
  }

  /** Aborted: pages freed now, or quarantined when a peer may still write them. */
  giveBack(r: SchedRequest, peerMayWrite: boolean): 'now' | 'after-peer' {
    const tags = tagsOf(r.state);
    this.#forget(r);
    if (peerMayWrite && !this.#faults.has('free-before-ack')) {
      const quarantined = this.#pages.quarantine(r, tags);
      if (quarantined.length === 0) return 'now';
      this.quarantined.set(r.rid, { owner: { rid: r.rid, tenant: r.tenant }, tags: quarantined });
      return 'after-peer';
    }
    this.#pages.letGo(r, tags);
    return 'now';
  }

  /** A request that ended while its step ran: now that the step is over, its pages move. */
  endAfterStep(r: SchedRequest, state: Extract<RequestState, { kind: 'ending' }>): void {
    switch (state.ending.kind) {
      case 'aborted':
        this.giveBack(r, state.ending.peerMayWrite);
        return;
      case 'finished':
        this.#pages.retire(r, computedTokens(r), state.table.tags);
        this.#forget(r);
        return;
      default:
        assertNever(state.ending, 'ending');
    }
  }

  /** Prefill role, decode's Ack: the held prompt pages go to the prefix cache or are freed. Returns the page count. */
  releaseHeld(r: SchedRequest): number {
    const tags = tagsOf(r.state);
    assert(r.state.kind === 'held', () => `${r.rid} is ${r.state.kind}, not held`);
    this.#pages.retire(r, computedTokens(r), tags);
    this.#forget(r);
    return tags.length;
  }

  /** The peer's AbortAck or connection close: quarantined pages are freed. Undefined when rid has none. */
  releaseQuarantine(rid: RequestId): number | undefined {
    const record = this.quarantined.get(rid);
    if (record === undefined) return undefined;
    this.#pages.release(record.owner, record.tags);
    this.quarantined.delete(rid);
    return record.tags.length;
  }

  /** Out of every structure (its pages are the caller's business). */
  #forget(r: SchedRequest): void {
    if (isRunning(r.state)) this.#leaveRunning(r);
    if (r.state.kind === 'waiting') this.waiting.remove(r.rid);
    this.requests.delete(r.rid);
    this.counters.leave(r.tenant);
  }

  #leaveRunning(r: SchedRequest): void {
    const index = this.running.indexOf(r);
    assert(index >= 0, () => `${r.rid} is not in the running set`);
    this.running.splice(index, 1);
  }
}

export function isRunning(state: RequestState): boolean {
  return state.kind === 'prefilling' || state.kind === 'decoding';
}

export function finishedEvent(r: SchedRequest, finishReason: FinishReason): SchedulerEvent {
  return {
    kind: 'finished',
    rid: r.rid,
    finishReason,
    usage: {
      promptTokens: r.numPromptTokens,
      completionTokens: numOutputTokens(r),
      cachedTokens: r.numCachedTokens,
      ...(r.draft === undefined ? {} : { draftTokens: r.draft.numDrafted, acceptedDraftTokens: r.draft.numAccepted }),
    },
  };
}
