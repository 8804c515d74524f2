// What a worker samples with, and what it knows of a request when it samples: the two shapes the
// step's results (step-results.ts), speculative verification (spec-verify.ts) and prompt
// log-probabilities share. Types only; owns no behaviour.
import type { SamplingParams, TokenLogprob } from '../core/index.js';

/** What samples one token (src/engine's Sampler, structurally). */
export interface TokenSampler {
  sample(
    logits: Float32Array,
    params: SamplingParams,
    stepIndex: number,
    previous: readonly number[],
    mask?: Int32Array,
  ): number;
  /** `token`'s log-probability and the topN most likely tokens', from the logits as the model gave them. */
  logprobsOf(logits: Float32Array, token: number, topN: number): TokenLogprob;
}

/** A request's sampling parameters, the index of the output token to sample next, and its output so far. */
export interface SamplingState {
  readonly params: SamplingParams;
  readonly numOutputTokens: number;
  /** Its output tokens so far (asked only of a request with penalties). */
  outputTokens(): readonly number[];
  /** A constrained request's allowed next tokens (src/grammar's bitmask), prepared before the step ended. */
  readonly mask?: () => Int32Array;
  /** A constrained request's masks after each of a speculative step's drafts the grammar accepts (src/grammar). */
  readonly draftMasks?: (drafts: readonly number[]) => readonly Int32Array[];
}
