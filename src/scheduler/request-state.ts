// A request as the scheduler tracks it, and the states it moves through.
// Owns: the per-request record, its page table, and the small pure questions about it.
// Must never: touch the ledger (page-ops.ts does) or decide what runs (plan.ts does).
//
//   colocated     waiting --> prefilling --> decoding --> (finished: gone)
//                    ^             |             |
//                    +-------------+-------------+  preempted: pages back, recompute later
//   prefill       waiting --> prefilling --> held --> (released after decode's Ack: gone)
//   decode        receiving --> decoding --> (finished);  preempted: waiting --> prefilling
//   any running   --> ending (aborted or finished while its step runs) --> gone at complete()
//
// Positions and tokens: `tokens` is the prompt followed by every output token. Positions
// [0, numComputed) have K/V in the pages of `tags`, stamped by whoever wrote them. A request
// computes until numComputed === tokens.length, and the step that gets there wants logits: the
// token sampled from them is appended. Decoding is that same rule with one token to go:
//
//   tokens:  p0 p1 p2 p3 p4 p5 | o0 o1 o2          pageSize 4
//   pages:   [p0 p1 p2 p3] [p4 p5 o0 o1] .         numComputed = 8; o2 is fed next, at position 8,
//                                                  into a third page allocated for it.
import { assertNever, type RequestId, type Tag, type TenantId } from '../core/index.js';
import { pagesFor, type Owner } from '../pages/index.js';
import type { DraftState } from './spec-lookup.js';
import type { RequestStateKind, RequestView } from './types.js';

/**
 * Mutable by the scheduler only; tags.length === pagesFor(numComputed) between steps, except
 * that a speculating decode may keep more: pages that only its rejected drafts filled, their
 * stamps rolled back to empty (its own free slots; the next step's drafts or token reuse them).
 */
export interface PageTable {
  tags: Tag[];
  numComputed: number;
}

/** How a request that ended during its step ends, once the step is over. */
export type Ending =
  | { readonly kind: 'aborted'; readonly peerMayWrite: boolean }
  /** Finished (e.g. by a stop string); its finished event was already given out. */
  | { readonly kind: 'finished' };

export type RequestState =
  /** Queued; holds no page. */
  | { readonly kind: 'waiting' }
  /** Running: computing its prompt (or, after preemption, prompt and output) chunk by chunk. */
  | { readonly kind: 'prefilling'; readonly table: PageTable }
  /** Running: one token per step. */
  | { readonly kind: 'decoding'; readonly table: PageTable }
  /** Decode role: pages reserved for the prompt; a peer is filling them. Never read or preempted. */
  | { readonly kind: 'receiving'; readonly tags: readonly Tag[] }
  /** Prefill role: done computing; pages kept until decode acknowledges the transfer. */
  | { readonly kind: 'held'; readonly table: PageTable; readonly firstToken: number }
  /** Ended while its step runs; its pages return in complete(). */
  | { readonly kind: 'ending'; readonly table: PageTable; readonly ending: Ending };

export interface SchedRequest extends Owner {
  readonly rid: RequestId;
  readonly tenant: TenantId;
  readonly numPromptTokens: number;
  readonly maxTokens: number;
  readonly stopTokenIds: ReadonlySet<number>;
  /** It wants its prompt's log-probabilities: its prompt chunks want a logits row per token, and it reuses no cached prefix. */
  readonly promptLogprobs: boolean;
  /** An embedding request: its last prompt chunk returns the hidden state (BatchItem.hiddenOut) and it finishes there. */
  readonly embed: boolean;
  /** The LoRA adapter its steps run with (BatchItem.adapter); its tenant already carries the adapter's digest. */
  readonly adapter?: string;
  /** The prompt, then every output token. */
  readonly tokens: number[];
  /** Its prompt-lookup speculation (spec-lookup.ts); none when speculation is off. */
  readonly draft?: DraftState;
  /** Prompt tokens the prefix cache supplied when the request last started. */
  numCachedTokens: number;
  state: RequestState;
}

export function numOutputTokens(r: SchedRequest): number {
  return r.tokens.length - r.numPromptTokens;
}

/** The pages a request holds, in page-table order (none while waiting). */
export function tagsOf(state: RequestState): readonly Tag[] {
  switch (state.kind) {
    case 'waiting':
      return [];
    case 'receiving':
      return state.tags;
    case 'prefilling':
    case 'decoding':
    case 'held':
    case 'ending':
      return state.table.tags;
    default:
      return assertNever(state, 'request state');
  }
}

export function numComputedOf(state: RequestState): number {
  switch (state.kind) {
    case 'waiting':
    case 'receiving':
      return 0;
    case 'prefilling':
    case 'decoding':
    case 'held':
    case 'ending':
      return state.table.numComputed;
    default:
      return assertNever(state, 'request state');
  }
}

/** The tokens whose K/V the request's pages hold: what may go into the prefix cache. */
export function computedTokens(r: SchedRequest): readonly number[] {
  return r.tokens.slice(0, numComputedOf(r.state));
}

/** Page i's slots that hold positions [0, numComputed). */
export function slotsOfPage(i: number, numComputed: number, pageSize: number): number {
  return Math.max(0, Math.min(pageSize, numComputed - i * pageSize));
}

/** Pages a table must hold to compute `numTokens` more tokens. */
export function pagesToGrow(table: PageTable, numTokens: number, pageSize: number): number {
  return Math.max(0, pagesFor(table.numComputed + numTokens, pageSize) - table.tags.length);
}

export function viewOf(r: SchedRequest): RequestView {
  return {
    rid: r.rid,
    state: r.state.kind satisfies RequestStateKind,
    numPromptTokens: r.numPromptTokens,
    numOutputTokens: numOutputTokens(r),
    numComputed: numComputedOf(r.state),
    tags: [...tagsOf(r.state)],
  };
}
