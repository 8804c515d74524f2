// One model step's work for one request, as the scheduler plans it and the model runner
// executes it. Plain data shared by src/scheduler (which plans) and src/model (which runs).
import type { RequestId, Tag, TenantId } from './ids.js';

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
}
