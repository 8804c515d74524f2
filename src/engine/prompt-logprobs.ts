// A prompt's own log-probabilities (completions' `echo` with `logprobs`, vLLM's `prompt_logprobs`),
// taken from the logits rows of the prompt chunks the scheduler planned with `promptRows`
// (plan.ts: one row per token). Row r of a chunk starting at startPos holds the logits after
// position startPos + r, so it gives prompt token startPos + r + 1 its log-probability:
//
//   prompt:   t0    t1    t2    t3 | o0        rows of the chunk [t0 t1] and of the last [t2 t3]
//   rows:     r0    r1    r2    r3
//   gives:    t1    t2    t3    (samples o0)   t0 has none (null), as OpenAI and vLLM answer
//
// Owns: filling each request's record and handing the sampler what it expects of such an item
// (the last row alone when the item ends the prompt, else nothing: a computed chunk).
// Must never: sample from or record into another request's rows, nor record a position twice
// (recomputation after preemption gives the same rows; the first record stays). Fault
// `shift-prompt-logprobs` reads each token's from the row after its own (the negative control).
import { InvariantError, type BatchItem, type FaultSet, type RequestId, type TokenLogprob } from '../core/index.js';
import type { ItemResult } from './runner.js';
import type { TokenSampler } from './step-results.js';

/** One request's prompt log-probabilities, filled as its prompt chunks run. */
export interface PromptLogprobs {
  readonly promptTokens: readonly number[];
  /** The alternatives each position reports (0..MAX_TOP_LOGPROBS). */
  readonly topN: number;
  /** One per prompt token; [0] stays null. Complete once the first output token is sampled. */
  readonly logprobs: (TokenLogprob | null)[];
}

export function promptLogprobsFor(promptTokens: readonly number[], topN: number): PromptLogprobs {
  return { promptTokens, topN, logprobs: promptTokens.map(() => null) };
}

/**
 * The step's results with the prompt rows taken: each `promptRows` item's rows recorded, its
 * result then a plain `computed` (a chunk before the end) or `logits` of its last row (the chunk
 * that samples). `recordOf`: the request's record and its tokens so far (prompt + output);
 * undefined once it ended (its rows are dropped, its result left for the sampler to fail).
 */
export function takePromptRows(
  items: readonly BatchItem[],
  outputs: readonly ItemResult[],
  sampler: TokenSampler,
  recordOf: (rid: RequestId) => { readonly record: PromptLogprobs; readonly numTokens: number } | undefined,
  faults: FaultSet,
): ItemResult[] {
  const shift = faults.has('shift-prompt-logprobs') ? 1 : 0;
  return outputs.map((out, i): ItemResult => {
    const item = items[i];
    if (out.kind !== 'logits' || item?.promptRows !== true) return out;
    if (item.rid !== out.rid) throw new InvariantError(`prompt rows: item ${item.rid} got ${out.rid}'s result`);
    const V = out.logits.length / out.rows;
    const of = recordOf(out.rid);
    if (of !== undefined) {
      const { record } = of;
      const P = record.promptTokens.length;
      for (let r = 0; r < out.rows; r++) {
        const position = item.startPos + r + 1; // the token this row predicts
        if (position >= P || record.logprobs[position] !== null) continue;
        const from = Math.min(r + shift, out.rows - 1);
        const row = out.logits.subarray(from * V, (from + 1) * V);
        const token = record.promptTokens[position] as number;
        record.logprobs[position] = { ...sampler.logprobsOf(row, token, record.topN), promptRank: rankOf(row, token) };
      }
    }
    const end = item.startPos + item.tokens.length;
    const samples = of === undefined || end === of.numTokens;
    if (!samples) return { kind: 'computed', rid: out.rid };
    return { kind: 'logits', rid: out.rid, logits: out.logits.subarray((out.rows - 1) * V, out.rows * V), rows: 1 };
  });
}

/** 1 + how many tokens have a larger logit than `token` (vLLM's rank; NaN counts as less likely). */
function rankOf(logits: Float32Array, token: number): number {
  const own = logits[token] as number;
  let above = 0;
  for (let i = 0; i < logits.length; i++) if ((logits[i] as number) > own) above++;
  return above + 1;
}
