// Speculative decoding, the worker's half: verifying a decode's drafts from its k + 1 logits rows,
// and rolling back the stamps of the positions it rejected, in the same step.
// Owns: the per-position verdict and the rollback call after it.
//
// The verdict is Leviathan et al.'s (2023) rejection sampling for a deterministic draft: the
// draft distribution q is a point mass on d, so "accept d with probability min(1, p(d)/q(d)) =
// p(d), else draw from normalize(max(0, p - q)) = p without d" is one draw x from p itself,
// accepted exactly when x = d: P(d) = p(d), P(y != d) = (1 - p(d)) p(y) / (1 - p(d)) = p(y). We draw
// x with the position's own seeded draw (engine/sampler.ts: uniformAt(seed, 0, stepIndex)), so
// the token at every position is the very token plain decoding samples there: greedy and seeded
// sampling give the same output with speculation on or off, in any batch, co-located or on a
// decode node, and the acceptance rate is p(d), the most any verifier of a point-mass draft gets.
// Must never: let a rejected position stay stamped (fault `keep-rejected-stamps`, the negative
// control), sample a position with parameters, penalties or a step index other than the ones
// plain decoding would use there, or report log-probabilities other than the target model's.
//
//   item:    t   d1  d2  d3            (startPos s; drafts from scheduler/spec-plan.ts)
//   rows:    r0  r1  r2  r3            row j: the distribution after t d1 .. dj
//   verdict: r0 accepts d1, r1 rejects d2 and samples x: accepted [d1], token x
//   stamps:  s, s+1 stay (t, d1); s+2, s+3 (d2, d3) rolled back: pool.rollbackStamps(tags, s+2, s+4)
//
// Position j samples output index numOutputTokens + j with the output so far plus the drafts
// accepted before it as `previous` (penalties), exactly as j plain decode steps would. A
// constrained request (structured output) samples row j under the grammar's mask after d1..dj
// (src/grammar made them and rolled its matcher back): a draft the grammar refuses is never the
// draw, so it is rejected, and every accepted token is one the grammar accepts, as plain decoding's.
import { assert, usesPenalties, type BatchItem, type FaultSet, type TokenLogprob } from '../core/index.js';
import type { ItemResult } from './runner.js';
import type { PagePool } from '../pages/index.js';
import type { StepResult } from '../scheduler/index.js';
import type { SamplingState, TokenSampler } from './sampling.js';

/** Whether an item verifies drafts: a decode that feeds its token and k >= 1 drafts, every row wanted. */
export function isDraftItem(item: BatchItem): boolean {
  return item.verifiesDrafts === true;
}

/** The verdict on one decode's drafts: the accepted prefix, then one sampled token. */
export function verifyDrafts(
  result: Extract<ItemResult, { kind: 'logits' }>,
  item: BatchItem,
  state: SamplingState,
  sampler: TokenSampler,
  /** Fault point skip-token-mask: sample without the grammar's masks. */
  skipMask = false,
  /** Fault point forced-answer: the id output token i is instead of its draw (undefined: draw it). */
  forced: (index: number) => number | undefined = () => undefined,
): Extract<StepResult, { kind: 'sampled' }> {
  const drafts = item.tokens.slice(1);
  assert(
    item.rid === result.rid && result.rows === item.tokens.length && drafts.length >= 1,
    () => `${result.rid}: ${result.rows} logits rows to verify an item of ${item.tokens.length} tokens`,
  );
  const masks =
    state.mask === undefined || skipMask ? undefined : [state.mask(), ...(state.draftMasks?.(drafts) ?? [])];
  const vocab = result.logits.length / result.rows;
  const { params } = state;
  const topN = params.logprobs;
  const previous = usesPenalties(params) ? [...state.outputTokens()] : [];
  const accepted: { token: number; logprob?: TokenLogprob }[] = [];
  for (let j = 0; j < result.rows; j++) {
    const row = result.logits.subarray(j * vocab, (j + 1) * vocab);
    const stepIndex = state.numOutputTokens + j;
    const draft = drafts[j];
    const mask = masks?.[j];
    // Row j is reached only past drafts the last row's mask allowed: the grammar accepted them.
    assert(masks === undefined || mask !== undefined, () => `${result.rid}: no grammar mask for draft row ${j}`);
    const token = forced(stepIndex) ?? sampler.sample(row, params, stepIndex, previous, mask);
    const logprob = topN === null ? undefined : sampler.logprobsOf(row, token, topN);
    if (draft !== undefined && token === draft) {
      accepted.push(logprob === undefined ? { token } : { token, logprob });
      previous.push(token);
      continue;
    }
    return {
      kind: 'sampled',
      rid: result.rid,
      token,
      ...(logprob === undefined ? {} : { logprob }),
      drafts: { numDrafted: drafts.length, accepted },
    };
  }
  throw new Error('unreachable: the last row has no draft and always samples');
}

/**
 * After verification, before complete(): the stamps of every draft item's rejected positions
 * are rolled back to the accepted end (its fed token and accepted drafts). An item that did not
 * come back verified (failed, or its request ended) keeps only its fed token, as a plain decode
 * would have written. A page check failure wrote nothing: nothing to roll back.
 * Returns the rejected positions rolled back.
 */
export function rollbackRejected(
  pool: PagePool,
  items: readonly BatchItem[],
  outputs: readonly ItemResult[],
  results: readonly StepResult[],
  faults: FaultSet,
): number {
  let numRolledBack = 0;
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as BatchItem;
    if (!isDraftItem(item) || outputs[i]?.kind !== 'logits') continue;
    const result = results[i];
    const keptEnd = item.startPos + 1 + (result?.kind === 'sampled' ? (result.drafts?.accepted.length ?? 0) : 0);
    const writtenEnd = item.startPos + item.tokens.length;
    numRolledBack += writtenEnd - keptEnd;
    if (faults.has('keep-rejected-stamps')) continue;
    pool.rollbackStamps(item.tags, keptEnd, writtenEnd);
  }
  return numRolledBack;
}
