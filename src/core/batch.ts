// One model step's work for one request, as the scheduler plans it and the model runner
// executes it. Plain data shared by src/scheduler (which plans) and src/engine (which runs).
import type { RequestId, Tag, TenantId } from './ids.js';

/**
 * Logits rows a step gives prompt log-probabilities beyond one per running request: a chunk of a
 * request with promptLogprobs takes at most this many + 1 tokens (one row each). The runner's
 * maxStepLogits must be at least maxRunningRequests + this where the scheduler is told it.
 * 64 rows x a 152k vocabulary = 39 MB of f32 logits.
 */
export const PROMPT_LOGIT_ROWS = 64;

export interface BatchItem {
  readonly rid: RequestId;
  readonly tenant: TenantId;
  /** Token ids to feed this step: a prefill chunk, or the one last sampled token when decoding. */
  readonly tokens: readonly number[];
  /** Position of tokens[0]; positions [0, startPos) are already in this request's pages. */
  readonly startPos: number;
  /** The request's page table: tags covering positions [0, startPos + tokens.length). */
  readonly tags: readonly Tag[];
  /** True when the logits of the last token are wanted (end of prefill, or decoding). */
  readonly wantLogits: boolean;
  /**
   * With wantLogits, how many of the last tokens want logits (default 1, at most tokens.length):
   * a speculative decode's verified drafts, or a prompt's own log-probabilities (echo). Each row
   * counts against the runner's maxStepLogits.
   */
  readonly logitCount?: number;
  /**
   * Speculative decoding: the item is a decode whose tokens after the first are drafts to verify
   * (logitCount = tokens.length); the worker rolls back the stamps of the positions it rejects.
   */
  readonly verifiesDrafts?: boolean;
  /**
   * With logitCount: the rows are the prompt's own (its tokens' log-probabilities, wanted by a
   * request with promptLogprobs), not drafts; the worker takes them (src/engine/prompt-logprobs.ts)
   * and samples, when the item ends the prompt, from the last row only.
   */
  readonly promptRows?: boolean;
  /**
   * An embedding request's last chunk (with wantLogits, one row): the runner returns its last
   * token's final hidden state (after the final norm, [hiddenSize]) in place of logits.
   */
  readonly hiddenOut?: boolean;
  /** The LoRA adapter the item's rows run with, by its name on the engine (none: the base model). */
  readonly adapter?: string;
}
