// The fields that carry a prompt's own log-probabilities across PD (sampling.promptLogprobs in
// Reserve/Prefill, KvDone.promptLogprobs, the first Tokens' promptLogprobs, a TokenLogprob's
// promptRank) survive the wire codec, are optional (a frame without them decodes as before), and
// are checked like every other field.
import { describe, expect, it } from 'vitest';
import { asRequestId, samplingParams } from '../core/index.js';
import { isCodecError } from './codec-fields.js';
import { decodeFrame, encodeFrame } from './codec.js';
import type { Message } from './messages.js';

const rid = asRequestId('r1');
const D16 = '0123456789abcdef';
const lp = (logprob: number, promptRank?: number) => ({
  logprob,
  top: [{ id: 4, logprob: -0.5 }],
  ...(promptRank === undefined ? {} : { promptRank }),
});
const kvDone = {
  type: 'KvDone',
  rid,
  numChunks: 1,
  tokensCovered: 3,
  digest: D16,
  promptDigest: D16,
  model: D16,
  firstToken: 7,
  firstLogprobs: [lp(-1)],
} as const;

describe('prompt log-probabilities on the wire', () => {
  it.each<Message>([
    { ...kvDone, promptLogprobs: [lp(-2.5, 3), lp(-0.5, 1)] },
    { ...kvDone },
    { type: 'Tokens', rid, offset: 0, ids: [7], logprobs: [], promptLogprobs: [lp(-3, 9)] },
    { type: 'Tokens', rid, offset: 1, ids: [8], logprobs: [lp(-1)] },
  ])('round-trips %#', (message) => {
    expect(decodeFrame(encodeFrame(message))).toEqual(message);
  });

  it('carries sampling.promptLogprobs in Prefill, and refuses one out of range', () => {
    const prefill = (promptLogprobs: number): Message => ({
      type: 'Prefill',
      rid,
      tenant: 'default' as never,
      tokens: [1, 2, 3],
      sampling: samplingParams({ promptLogprobs }),
      decodeAddress: '127.0.0.1:1',
      tags: [],
      pageSize: 4,
    });
    expect(decodeFrame(encodeFrame(prefill(5)))).toEqual(prefill(5));
    let error: unknown;
    try {
      decodeFrame(encodeFrame(prefill(21)));
    } catch (e) {
      error = e;
    }
    expect(isCodecError(error)).toBe(true);
  });
});
