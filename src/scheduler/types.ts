// The scheduler's vocabulary: its options, what one step's plan holds, what the runner reports
// back, and what the scheduler tells the worker. Plain data; no behaviour.
// Must never: carry a clock, a socket or anything the runner could use to reach pages other
// than through the tags of a BatchItem.
import type {
  BatchItem,
  FaultSet,
  FinishReason,
  RequestId,
  Tag,
  TesseraError,
  TokenLogprob,
  Usage,
} from '../core/index.js';
import type { PagePool, PrefixCache } from '../pages/index.js';
import type { FairShareWeights } from './fair-share.js';
import type { SpecOptions } from './spec-lookup.js';

/**
 * colocated: admit -> prefill -> decode -> finish, on one pool.
 * prefill:   admit -> prefill -> held (pages kept for the transfer) -> release after decode's Ack.
 * decode:    reserve (pages for the prompt) -> a peer fills them -> startDecode -> decode -> finish.
 */
export const ROLES = ['colocated', 'prefill', 'decode'] as const;
export type Role = (typeof ROLES)[number];

export interface SchedulerOptions {
  readonly role: Role;
  /** The worker's pool; its ledger is the one truth about pages. */
  readonly pool: PagePool;
  /** The tenant-scoped prefix cache over the same pool; prefix reuse is off without one. */
  readonly prefixCache?: PrefixCache;
  /** Token slots per page; must equal pool.pageSize (said twice so a miswired config fails at start-up). */
  readonly pageSize: number;
  /** Most positions one request may use: prompt tokens + max_tokens. */
  readonly contextLength: number;
  /** Most requests prefilling or decoding at once (in the decode role, reserved ones count too). */
  readonly maxRunningRequests: number;
  /** Token budget of one step across all its items; at least maxRunningRequests, so every decode fits. */
  readonly chunkedPrefillSize: number;
  /** Most requests waiting to start; a new request beyond it is refused as `overloaded`. */
  readonly maxWaiting: number;
  readonly faults: FaultSet;
  /** The model's end-of-sequence ids; they end a request unless its sampling says ignoreEos. */
  readonly eosTokenIds?: readonly number[];
  /**
   * Decode role: reserve() takes a request only when the pages its output may need (and those
   * every taken request may still need) are free too, so none is preempted mid-stream (a decode
   * worker cannot recompute: it fails a preempted request). Off: pages on demand, as co-located.
   */
  readonly reserveOutputPages?: boolean;
  /**
   * The virtual token counters' weights (fair-share.ts; default 1 per prompt token, 2 per output
   * token): which tenant's chunk or new request gets a step's tokens first. Order only.
   */
  readonly fairShare?: FairShareWeights;
  /**
   * Logits rows a step may give prompt log-probabilities beyond one per running request (the
   * runner's maxStepLogits - maxRunningRequests; core's PROMPT_LOGIT_ROWS). Default 0: such a
   * request's prompt goes one token per step.
   */
  readonly promptLogitRows?: number;
  /**
   * Speculative decoding by prompt lookup (spec-lookup.ts): a decode may carry draft tokens that
   * its step verifies (BatchItem.logitCount). None, or maxDraft 0: off.
   */
  readonly speculation?: SpecOptions;
}

/** One step's work. Execute `items`, then call complete() with one result per item. */
export interface StepPlan {
  readonly items: readonly BatchItem[];
  /** Requests preempted while planning: their pages are back, they wait to recompute. */
  readonly preempted: readonly RequestId[];
  /** Requests that ended while planning (only when admission was skipped: see plan.ts). */
  readonly events: readonly SchedulerEvent[];
}

/** What the runner reports for one item of the step. */
export type StepResult =
  /** The item's K/V were written and stamped; no logits were wanted. */
  | { readonly kind: 'computed'; readonly rid: RequestId }
  /**
   * The item's K/V were written and stamped, and `token` was sampled from its last position's
   * logits (with its log-probabilities when the request asked for them).
   */
  | {
      readonly kind: 'sampled';
      readonly rid: RequestId;
      readonly token: number;
      readonly logprob?: TokenLogprob;
      /** A speculative decode's verdict: the drafts accepted before `token` (which follows them). */
      readonly drafts?: DraftVerdict;
    }
  /** The item failed (e.g. a PageCheckError): that request ends with this error, nothing else does. */
  | { readonly kind: 'failed'; readonly rid: RequestId; readonly error: TesseraError };

/** What verification made of one decode's drafts (the positions after the fed token, in order). */
export interface DraftVerdict {
  /** Draft tokens the item carried (its tokens after the first). */
  readonly numDrafted: number;
  /** The accepted prefix of the drafts, each with its target log-probability when asked. */
  readonly accepted: readonly { readonly token: number; readonly logprob?: TokenLogprob }[];
}

export type SchedulerEvent =
  /** A new output token (recomputation after preemption never repeats one). */
  | { readonly kind: 'token'; readonly rid: RequestId; readonly token: number; readonly logprob?: TokenLogprob }
  | { readonly kind: 'finished'; readonly rid: RequestId; readonly finishReason: FinishReason; readonly usage: Usage }
  | { readonly kind: 'failed'; readonly rid: RequestId; readonly error: TesseraError }
  /**
   * Prefill role: the prompt's K/V are in `tags` (positions [0, numTokens)) and the first token
   * was sampled. The pages stay held until release(rid) (decode's Ack) or abort(rid).
   */
  | {
      readonly kind: 'prefilled';
      readonly rid: RequestId;
      readonly firstToken: number;
      readonly firstLogprob?: TokenLogprob;
      readonly tags: readonly Tag[];
      readonly numTokens: number;
      /** Prompt tokens the prefix cache supplied. */ readonly numCachedTokens?: number;
    };

export type AdmitResult = { readonly kind: 'admitted' } | { readonly kind: 'rejected'; readonly error: TesseraError };

export type ReserveResult =
  | { readonly kind: 'reserved'; readonly tags: readonly Tag[] }
  | { readonly kind: 'rejected'; readonly error: TesseraError };

/** Decode role: the transfer is done; the events are an end, if the first token ended it (no token event). */
export type StartDecodeResult =
  { readonly kind: 'started'; readonly events: readonly SchedulerEvent[] } | { readonly kind: 'not-found' };

export type AbortResult =
  | {
      readonly kind: 'aborted';
      /** The state the request was in. */
      readonly was: RequestStateKind;
      /**
       * now: its pages are back in the ledger. after-step: it was in the step being run; its
       * pages come back in complete(). after-peer: quarantined; call release(rid) after the
       * peer's AbortAck or the close of its connection.
       */
      readonly pages: 'now' | 'after-step' | 'after-peer';
    }
  /** Unknown, already ended or already aborted: nothing to do. */
  | { readonly kind: 'not-found' };

export type ReleaseResult = { readonly kind: 'released'; readonly numPages: number } | { readonly kind: 'not-found' };

export type FinishResult =
  { readonly kind: 'finished'; readonly event: SchedulerEvent } | { readonly kind: 'not-found' };

export const REQUEST_STATE_KINDS = ['waiting', 'prefilling', 'decoding', 'receiving', 'held', 'ending'] as const;
export type RequestStateKind = (typeof REQUEST_STATE_KINDS)[number];

/** A read-only snapshot of one request, for the worker, metrics and tests. */
export interface RequestView {
  readonly rid: RequestId;
  readonly state: RequestStateKind;
  readonly numPromptTokens: number;
  readonly numOutputTokens: number;
  /** Positions whose K/V are in this request's pages. */
  readonly numComputed: number;
  readonly tags: readonly Tag[];
}
