// Sampling after a step: each item from its own logits; the `swap-batch-rows` fault (the negative
// control of the non-interference e2e test) hands each its neighbour's.
import { describe, expect, it } from 'vitest';
import { asRequestId, FaultSet, NO_FAULTS, samplingParams, type RequestId } from '../core/index.js';
import type { ItemResult } from './runner.js';
import { toStepResults } from './step-results.js';
import { argmaxSampler } from '../worker/testing/fake-engine.js';

const rid = (s: string): RequestId => asRequestId(s);
const oneHot = (n: number, at: number) => Object.assign(new Float32Array(n), { [at]: 1 });
const results: ItemResult[] = [
  { kind: 'logits', rid: rid('a'), logits: oneHot(8, 1), rows: 1 },
  { kind: 'computed', rid: rid('b') },
  { kind: 'logits', rid: rid('c'), logits: oneHot(8, 5), rows: 1 },
];
const state = () => ({ params: samplingParams(), numOutputTokens: 0, outputTokens: () => [] });

describe('toStepResults', () => {
  it('samples each item from its own logits and passes the rest through', () => {
    expect(toStepResults(results, argmaxSampler, state, NO_FAULTS)).toEqual([
      { kind: 'sampled', rid: 'a', token: 1 },
      { kind: 'computed', rid: 'b' },
      { kind: 'sampled', rid: 'c', token: 5 },
    ]);
  });

  it('under swap-batch-rows, samples each item from its neighbour (and a lone item from its own)', () => {
    const swapped = toStepResults(results, argmaxSampler, state, new FaultSet(['swap-batch-rows']));
    expect(swapped.map((r) => (r.kind === 'sampled' ? r.token : null))).toEqual([5, null, 1]);
    const alone = toStepResults(results.slice(0, 1), argmaxSampler, state, new FaultSet(['swap-batch-rows']));
    expect(alone).toEqual([{ kind: 'sampled', rid: 'a', token: 1 }]);
  });

  it('does not sample a request that ended while its step ran', () => {
    const out = toStepResults(results.slice(0, 1), argmaxSampler, () => undefined, NO_FAULTS);
    expect(out[0]?.kind).toBe('failed');
  });

  it("hands the sampler the request's previous output only when it asks for penalties", () => {
    const seen: (readonly number[])[] = [];
    const recording = {
      sample: (_l: Float32Array, _p: unknown, _i: number, previous: readonly number[]) => (seen.push(previous), 0),
      logprobsOf: argmaxSampler.logprobsOf,
    };
    const asked: string[] = [];
    const withOutput = (params: ReturnType<typeof samplingParams>) => (r: RequestId) => ({
      params,
      numOutputTokens: 2,
      outputTokens: () => (asked.push(r), [3, 3]),
    });
    toStepResults(results, recording, withOutput(samplingParams()), NO_FAULTS);
    toStepResults(results, recording, withOutput(samplingParams({ frequencyPenalty: 0.5 })), NO_FAULTS);
    expect(seen).toEqual([[], [], [3, 3], [3, 3]]);
    expect(asked).toEqual(['a', 'c']);
  });

  it("attaches the sampled token's log-probabilities only for a request that asked, with as many alternatives as it asked", () => {
    const asked = (n: number | null) => () => ({
      params: samplingParams({ logprobs: n }),
      numOutputTokens: 0,
      outputTokens: () => [],
    });
    const plain = toStepResults(results.slice(0, 1), argmaxSampler, asked(null), NO_FAULTS)[0];
    expect(plain).toEqual({ kind: 'sampled', rid: 'a', token: 1 });
    const withTop = toStepResults(results.slice(0, 1), argmaxSampler, asked(2), NO_FAULTS)[0];
    const z = Math.log(Math.E + 7);
    expect(withTop).toEqual({
      kind: 'sampled',
      rid: 'a',
      token: 1,
      logprob: {
        logprob: expect.closeTo(1 - z, 6),
        top: [
          { id: 1, logprob: expect.closeTo(1 - z, 6) },
          { id: 0, logprob: expect.closeTo(-z, 6) },
        ],
      },
    });
  });

  it('fails only the item whose logits cannot be sampled', () => {
    const throwing = {
      logprobsOf: argmaxSampler.logprobsOf,
      sample: (logits: Float32Array) =>
        logits[5] === 1
          ? argmaxSampler.sample(logits, samplingParams(), 0, [])
          : (() => {
              throw new Error('no finite logit');
            })(),
    };
    const out = toStepResults(results, throwing, state, NO_FAULTS);
    expect(out.map((r) => r.kind)).toEqual(['failed', 'computed', 'sampled']);
  });
});
