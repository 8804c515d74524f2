// The runner's per-item results -> the scheduler's StepResults: sampling happens here, right
// after the step, while the logits (views into the runner's buffers) are still valid.
// Must never sample one request's token from another request's logits — except under the
// `swap-batch-rows` fault point, the negative control of the non-interference test, which
// hands every logits row to its neighbour exactly as a misaligned batch would. Under `forced-answer`
// (a test's lever, core/faults.ts) a request emits the ids the test gave instead of sampled ones.
import {
  AbortedError,
  assertNever,
  isTesseraError,
  InvariantError,
  usesPenalties,
  type BatchItem,
  type FaultSet,
  type RequestId,
} from '../core/index.js';
import type { ItemResult } from './runner.js';
import type { StepResult } from '../scheduler/index.js';
import type { SamplingState, TokenSampler } from './sampling.js';
import { isDraftItem, verifyDrafts } from './spec-verify.js';

export type { SamplingState, TokenSampler } from './sampling.js';

export function toStepResults(
  results: readonly ItemResult[],
  sampler: TokenSampler,
  /** undefined: the request ended while its step ran (the scheduler drops its result). */
  stateOf: (rid: RequestId) => SamplingState | undefined,
  faults: FaultSet,
  /** The step's items, in result order (a decode with drafts is verified from them: spec-verify.ts). */
  items?: readonly BatchItem[],
): StepResult[] {
  const logitsRows = results.flatMap((r) => (r.kind === 'logits' ? [r.logits] : []));
  const swap = faults.has('swap-batch-rows') && logitsRows.length > 1;
  let row = 0;
  return results.map((result, i): StepResult => {
    switch (result.kind) {
      case 'computed':
        return { kind: 'computed', rid: result.rid };
      case 'failed':
        return { kind: 'failed', rid: result.rid, error: result.error };
      case 'logits': {
        const logits = swap ? (logitsRows[(row + 1) % logitsRows.length] as Float32Array) : result.logits;
        row++;
        const state = stateOf(result.rid);
        if (state === undefined)
          return { kind: 'failed', rid: result.rid, error: new AbortedError('the request ended while its step ran') };
        try {
          const item = items?.[i];
          if (item !== undefined && isDraftItem(item))
            return verifyDrafts(result, item, state, sampler, faults.has('skip-token-mask'), (index) =>
              faults.forcedToken(state.params.seed, index),
            );
          const previous = usesPenalties(state.params) ? state.outputTokens() : [];
          const mask = state.mask?.(); // throws when the grammar failed or refused an earlier token
          const token =
            faults.forcedToken(state.params.seed, state.numOutputTokens) ??
            sampler.sample(
              logits,
              state.params,
              state.numOutputTokens,
              previous,
              faults.has('skip-token-mask') ? undefined : mask,
            );
          const topN = state.params.logprobs;
          return {
            kind: 'sampled',
            rid: result.rid,
            token,
            ...(topN === null ? {} : { logprob: sampler.logprobsOf(logits, token, topN) }),
          };
        } catch (error) {
          // E.g. logits with no finite value: this request fails, its neighbours go on.
          const failure = isTesseraError(error) ? error : new InvariantError(`sampling ${result.rid} failed`, error);
          return { kind: 'failed', rid: result.rid, error: failure };
        }
      }
      default:
        return assertNever(result, 'item result');
    }
  });
}
