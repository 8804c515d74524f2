// What a request asks the sampler for. Validated at the API edge; plain data everywhere else.
import type { ConstraintSpec } from './constraint.js';

export interface SamplingParams {
  /** Most tokens to generate (>= 1). */
  readonly maxTokens: number;
  /** 0 means greedy (argmax). */
  readonly temperature: number;
  /** Nucleus sampling mass in (0, 1]; 1 disables. */
  readonly topP: number;
  /** Keep the k most likely tokens; 0 disables. */
  readonly topK: number;
  /** Seed for the request's draws; the same seed and prompt give the same tokens. */
  readonly seed: number;
  /** Strings that end generation; the matched string is not returned. */
  readonly stop: readonly string[];
  /** Token ids that end generation (the model's EOS ids are added by the engine). */
  readonly stopTokenIds: readonly number[];
  /** Keep generating past EOS (benchmarks). */
  readonly ignoreEos: boolean;
  /**
   * OpenAI's penalties, in [-2, 2], on the request's own output so far: every token it already
   * generated has its logit lowered by presencePenalty, and by frequencyPenalty once per time it
   * was generated, before temperature, top-k, top-p or argmax. 0 and 0 change nothing.
   */
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  /**
   * null: no log-probabilities. N (0..MAX_TOP_LOGPROBS): every output token comes with its
   * log-probability and the N most likely tokens', from the model's own distribution at that
   * position (log-softmax of the logits, before penalties, temperature, top-k or top-p).
   */
  readonly logprobs: number | null;
  /**
   * vLLM's `prompt_logprobs` (and completions' `echo` with `logprobs`): N (0..MAX_TOP_LOGPROBS):
   * every prompt token after the first comes with its log-probability under the tokens before it
   * and the N most likely tokens' (the prefill computes them: src/engine/prompt-logprobs.ts).
   * Absent: none. Such a request reuses no cached prefix (its positions' logits are wanted).
   */
  readonly promptLogprobs?: number;
  /**
   * Structured output: only tokens that keep the output a valid prefix of this may be sampled
   * (src/grammar builds the masks). Absent: free text. It travels with the sampling parameters
   * (Reserve and Prefill carry them), so whichever node samples builds its own matcher.
   */
  readonly constraint?: ConstraintSpec;
}

/** The most alternatives a request may ask for with each token (OpenAI's limit). */
export const MAX_TOP_LOGPROBS = 20;

export const GREEDY: SamplingParams = {
  maxTokens: 16,
  temperature: 0,
  topP: 1,
  topK: 0,
  seed: 0,
  stop: [],
  stopTokenIds: [],
  ignoreEos: false,
  presencePenalty: 0,
  frequencyPenalty: 0,
  logprobs: null,
};

/** Whether sampling for `params` looks at the request's previous output tokens. */
export function usesPenalties(params: Pick<SamplingParams, 'presencePenalty' | 'frequencyPenalty'>): boolean {
  return params.presencePenalty !== 0 || params.frequencyPenalty !== 0;
}

export function samplingParams(overrides: Partial<SamplingParams> = {}): SamplingParams {
  return { ...GREEDY, ...overrides };
}
