// Speculative decoding by prompt lookup (n-gram drafting, no second model): the draft tokens one
// decoding request proposes for its next step, and how many it may propose.
// Owns: the request's n-gram index over its own tokens (prompt and output), the lookup, and the
// adaptive draft length from the request's acceptance. Pure and synchronous.
// Must never: look at another request's tokens (a draft is a guess the target model verifies, but
// a guess drawn from another tenant's prompt would still leak through timing), or propose a
// token that is not in its own request's text.
//
// The lookup (vLLM's "ngram", llama.cpp's lookup decoding): for n = maxNgram down to minNgram,
// find the most recent earlier occurrence of the last n tokens; the tokens that followed it are the
// draft, continued through the draft itself when they run into the end (a repeating pattern keeps
// repeating):
//
//   tokens:  ... a b c d e ... x y a b c |          last 3 = "a b c", seen ending before "d"
//   draft:                               d e ...    (up to k tokens)
//
// The index maps each n-gram to the end of its latest occurrence and is extended by the tokens
// appended since the last call, so a lookup costs O(n) however long the request is.
//
// The adaptive length (per request): k grows by one after a step that accepted every draft, and
// falls to accepted + 1 after one that did not; once the scheduler's measured step costs and the
// request's acceptance are known, k is the length up to maxDraft that pays best at the per-token
// acceptance (spec-cost.ts), and a request for which no length pays cools down as below. When the decayed acceptance rate falls below
// minAcceptance (after a few drafts), drafting pauses for a cool-down of steps that doubles each
// time (8, 16, ... 128), then tries again with k = 1: a request whose text never repeats stops
// paying for rows that are always rejected.
//
// With a draft model (--draft-model, `drafter: 'model'`) the tokens come from the worker
// (engine/draft-model.ts), which drafts greedily with the small model before each step and
// offers them here with the length of the text they continue; the adaptive length and the
// cool-down are the same, and a proposal is only ever an offer made for the tokens as they are.
import { assert } from '../core/index.js';
import type { Owner } from '../pages/index.js';
import { bestDraftLength, type SpecCost } from './spec-cost.js';

/** Prompt-lookup speculation's settings (--spec-max-draft and its defaults). */
export interface SpecOptions {
  /** Most draft tokens one decode verifies per step (k); 0 turns speculation off. */
  readonly maxDraft: number;
  /** Drafts only while at most this many requests decode in a step: beyond, the verified rows cost more than they save. */
  readonly maxBatch: number;
  /** Longest and shortest n-grams looked up. */
  readonly maxNgram: number;
  readonly minNgram: number;
  /** Below this decayed acceptance rate drafting pauses (cool-down). */
  readonly minAcceptance: number;
  /** Where drafts come from: the request's own text (default) or a draft model's offers. */
  readonly drafter?: 'lookup' | 'model';
}

export const DEFAULT_SPEC: SpecOptions = { maxDraft: 4, maxBatch: 4, maxNgram: 4, minNgram: 2, minAcceptance: 0.2 };

/** Decay of the acceptance counts per verified step (about the last 5 steps count). */
const DECAY = 0.8;
/** Decayed drafted tokens before the acceptance rate may pause drafting. */
// (Under 1 / (1 - DECAY) = 5: at one draft a step, as a rejected k = 1 drafts, the decayed count
// tends to 5; a threshold of 6 was never reached, and a request whose drafts all failed at k = 1
// drafted on forever: bench:spec's draft model at 0.40-0.60x.)
const MIN_EVIDENCE = 3;
const FIRST_COOLDOWN_STEPS = 8;
const MAX_COOLDOWN_STEPS = 128;

/** Every n-gram (minN..maxN) of a token sequence -> the end (exclusive) of its latest occurrence. */
export class NgramIndex {
  readonly #minN: number;
  readonly #maxN: number;
  /** Per n - minN: key -> end of the latest occurrence. */
  readonly #maps: Map<string, number>[];
  /** Ends [from, indexedTo) are indexed. */
  #indexedTo = 0;
  readonly #from: number;

  /** `from`: the first position whose tokens may be looked at (a decode node's prompt is placeholders). */
  constructor(minN: number, maxN: number, from = 0) {
    assert(
      Number.isInteger(minN) && minN >= 1 && maxN >= minN,
      () => `NgramIndex: bad n-gram lengths ${minN}..${maxN}`,
    );
    this.#minN = minN;
    this.#maxN = maxN;
    this.#from = from;
    this.#indexedTo = from;
    this.#maps = Array.from({ length: maxN - minN + 1 }, () => new Map<string, number>());
  }

  /** Up to k tokens that followed the latest earlier occurrence of the longest matching suffix of `tokens`. */
  draft(tokens: readonly number[], k: number): number[] {
    const len = tokens.length;
    if (k <= 0 || len - this.#from < this.#minN + 1) return [];
    // Index the n-grams ending before the last position (the suffix itself must not match itself).
    for (let end = Math.max(this.#indexedTo, this.#from + 1); end < len; end++) {
      for (let n = this.#minN; n <= this.#maxN && end - n >= this.#from; n++) {
        this.#maps[n - this.#minN]!.set(keyOf(tokens, end - n, end), end);
      }
    }
    this.#indexedTo = Math.max(this.#indexedTo, len);
    for (let n = Math.min(this.#maxN, len - this.#from - 1); n >= this.#minN; n--) {
      const end = this.#maps[n - this.#minN]!.get(keyOf(tokens, len - n, len));
      if (end === undefined) continue;
      const out: number[] = [];
      for (let i = 0; i < k; i++) {
        const pos = end + i;
        out.push(pos < len ? tokens[pos]! : out[pos - len]!);
      }
      return out;
    }
    return [];
  }
}

function keyOf(tokens: readonly number[], start: number, end: number): string {
  let key = '';
  for (let i = start; i < end; i++) key += `${tokens[i]},`;
  return key;
}

/** What a worker's draft model sees of a decoding request (Scheduler.decodingDrafts). */
export interface DraftCandidate extends Owner {
  readonly maxTokens: number;
  readonly numPromptTokens: number;
  /** The prompt, then every output token; the last one is not computed yet. */
  readonly tokens: readonly number[];
  readonly draft: DraftState;
}

/** One request's speculation: its index, its adaptive draft length, and its counts. */
export class DraftState {
  readonly #o: SpecOptions;
  readonly #index: NgramIndex;
  /** A draft model's tokens, offered for the text of length `atLength` (drafter 'model'). */
  #offer: { readonly atLength: number; readonly tokens: readonly number[] } | undefined;
  #minAcceptance: number;
  /** The measured step costs (the scheduler's), and a draft model's cost per drafted token in target steps. */
  readonly #cost: SpecCost | undefined;
  #draftCost = 0;
  #k: number;
  #decayedDrafted = 0;
  #decayedAccepted = 0;
  /** Decayed per-token trials: each accepted draft, and the first rejected one of a step (the ones after it were never judged). */
  #decayedTrials = 0;
  #coolDownLeft = 0;
  #nextCoolDown = FIRST_COOLDOWN_STEPS;
  /** The first verified step after a cool-down: it alone decides whether drafting resumes. */
  #probing = false;
  /** Draft tokens verified and accepted over the request's life. */
  numDrafted = 0;
  numAccepted = 0;

  /** The first position whose token is real (a decode node's prompt ids are placeholders). */
  readonly from: number;

  constructor(options: SpecOptions, from = 0, cost?: SpecCost) {
    this.#o = options;
    this.#cost = cost;
    this.from = from;
    this.#minAcceptance = options.minAcceptance;
    this.#index = new NgramIndex(options.minNgram, options.maxNgram, from);
    this.#k = Math.max(1, Math.ceil(options.maxDraft / 2));
  }

  /** The draft for the next step (at most `limit` tokens; empty while cooling down or without a match). */
  propose(tokens: readonly number[], limit: number): number[] {
    if (this.#coolDownLeft > 0) {
      this.#coolDownLeft--;
      this.#probing = this.#coolDownLeft === 0;
      this.#offer = undefined;
      return [];
    }
    const k = Math.min(this.draftLength, limit);
    if (k === 0) return [];
    if (this.#o.drafter !== 'model') return this.#index.draft(tokens, k);
    const offer = this.#offer;
    this.#offer = undefined;
    return offer === undefined || offer.atLength !== tokens.length ? [] : offer.tokens.slice(0, k);
  }

  /** Whether drafts come from a draft model's offers (engine/draft-model.ts). */
  get byModel(): boolean {
    return this.#o.drafter === 'model';
  }

  /** A draft model's tokens continuing the text of length `atLength`, for the next propose(). */
  offer(atLength: number, tokens: readonly number[]): void {
    assert(this.#o.drafter === 'model', "DraftState.offer: drafts come from the request's own text");
    this.#offer = { atLength, tokens };
  }

  /**
   * The acceptance rate below which drafting pauses: a draft model's worker sets it to what a
   * draft token costs against a target step (a drafted token pays only if it is accepted more
   * often than that), within [0.05, 0.95].
   */
  setMinAcceptance(rate: number): void {
    this.#minAcceptance = Math.min(0.95, Math.max(0.05, rate));
    this.#draftCost = this.#minAcceptance;
  }

  /** A verified step: `numDrafted` tokens proposed, the first `numAccepted` of them accepted. */
  observe(numDrafted: number, numAccepted: number): void {
    assert(numAccepted >= 0 && numAccepted <= numDrafted, () => `DraftState: ${numAccepted} of ${numDrafted} accepted`);
    if (numDrafted === 0) return;
    this.numDrafted += numDrafted;
    this.numAccepted += numAccepted;
    this.#decayedDrafted = this.#decayedDrafted * DECAY + numDrafted;
    this.#decayedAccepted = this.#decayedAccepted * DECAY + numAccepted;
    this.#decayedTrials = this.#decayedTrials * DECAY + numAccepted + (numAccepted < numDrafted ? 1 : 0);
    this.#k = numAccepted === numDrafted ? Math.min(this.#o.maxDraft, this.#k + 1) : Math.max(1, numAccepted + 1);
    if (this.#probing) {
      // A probe that drafted nothing acceptable cools down again at once (twice as long): one
      // wasted step per cool-down, not the several that rebuilding the evidence would take.
      this.#probing = false;
      if (numAccepted === 0) return this.#coolDown();
    }
    if (this.#decayedDrafted >= MIN_EVIDENCE && this.#decayedAccepted < this.#minAcceptance * this.#decayedDrafted)
      this.#coolDown();
  }

  /**
   * The draft length the next proposal may use: the adaptive length, capped by what pays at the
   * measured step costs once there is evidence (0 then starts a cool-down); 0 while cooling down.
   */
  get draftLength(): number {
    if (this.#coolDownLeft > 0) return 0;
    const k = Math.min(this.#k, this.#o.maxDraft);
    const cost = this.#cost;
    if (cost === undefined || this.#decayedDrafted < MIN_EVIDENCE || cost.ratio(1) === undefined) return k;
    // With evidence the model decides alone, up to maxDraft: resetting to accepted + 1 after each
    // rejection and climbing back one a step cost the 1B's quote workload (96% accepted) an
    // average draft of 2.6 tokens where 4 paid best (bench:spec).
    const best = bestDraftLength(
      perTokenAcceptance(this.#decayedAccepted, this.#decayedTrials),
      this.#o.maxDraft,
      (j) => cost.ratio(j) ?? 1,
      this.#draftCost,
    );
    if (best === 0) this.#coolDown();
    return best;
  }

  /** Drafting pauses for the next cool-down (doubling up to MAX_COOLDOWN_STEPS); its evidence starts over. */
  #coolDown(): void {
    this.#coolDownLeft = this.#nextCoolDown;
    this.#nextCoolDown = Math.min(MAX_COOLDOWN_STEPS, 2 * this.#nextCoolDown);
    this.#decayedDrafted = 0;
    this.#decayedAccepted = 0;
    this.#decayedTrials = 0;
    this.#k = 1;
  }
}

/**
 * The per-token acceptance a of E(k) = 1 + a + ... + a^k (spec-cost.ts) from accepted drafts and
 * trials (each accepted draft, plus the first rejected one of a step): the geometric model's
 * estimate. Accepted over drafted underestimates it, the more the longer the drafts (at a = 0.9
 * and k = 4 it gives 0.78), since the drafts after a rejection are counted without being judged.
 */
export function perTokenAcceptance(accepted: number, trials: number): number {
  return trials > 0 ? accepted / trials : 0;
}
