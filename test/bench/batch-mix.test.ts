// bench/lib/batch-mix.ts: which requests count as decoding when a token arrives, the groups'
// medians, and the ratio those medians alone give.
import { describe, expect, it } from 'vitest';
import { batchMix, decodeSpan } from '../../bench/lib/batch-mix.js';
import type { RequestResult } from '../../bench/lib/pd-client.js';

/** A request whose tokens arrive at `times` (ms since the phase began). */
function request(times: number[]): RequestResult {
  const itlAt: [number, number][] = times.slice(1).map((t, i) => [t, t - (times[i] as number)]);
  return {
    ttftMs: times[0] ?? 0,
    itlMs: itlAt.map(([, gap]) => gap),
    itlAt,
    e2eMs: times[times.length - 1] ?? 0,
    outputTokens: times.length,
  };
}

describe('decodeSpan', () => {
  it('runs from the first token to the last, and is undefined below two tokens', () => {
    expect(decodeSpan(request([100, 110, 125]))).toEqual([100, 125]);
    expect(decodeSpan(request([100]))).toBeUndefined();
  });
});

describe('batchMix', () => {
  it('groups each sample by the requests decoding when it arrived, itself included', () => {
    // a decodes alone until 30 (gaps of 10); b decodes from 35 to 90, beside a's 30-ms gaps.
    const a = request([0, 10, 20, 30, 60, 90]);
    const b = request([35, 60, 90]);
    const mix = batchMix([a, b], [a, b]);
    expect(mix.groups).toEqual([
      { decoding: 1, samples: 3, medianMs: 10 },
      { decoding: 2, samples: 4, medianMs: 30 },
    ]);
    // Medians per sample: 10, 10, 10, 30, 30, 30, 30 -> median 30; p99 30.
    expect(mix.ratio).toBe(1);
  });

  it('gives the ratio of the groups medians alone, whatever the noise inside a group', () => {
    // Batch 1: seven gaps of 10 and one of 30 (noise); batch 2 (from 110): gaps of 50 and 40.
    const alone = request([0, 10, 20, 30, 40, 50, 60, 70, 100, 150]);
    const beside = request([110, 150]);
    const mix = batchMix([alone, beside], [alone, beside]);
    expect(mix.groups.map((g) => [g.decoding, g.samples, g.medianMs])).toEqual([
      [1, 8, 10],
      [2, 2, 45],
    ]);
    // Each sample as its group's median: eight 10s and two 45s, so median 10 and p99 45. The raw
    // gaps would give 49.1 / 10: the 30-ms gap is noise inside batch 1, not the mix.
    expect(mix.ratio).toBeCloseTo(4.5, 10);
  });

  it('counts requests that are not chats (long prompts) as decoding beside them', () => {
    const chat = request([0, 20, 40]);
    const long = request([10, 50]);
    expect(batchMix([chat], [chat, long]).groups).toEqual([{ decoding: 2, samples: 2, medianMs: 20 }]);
    expect(batchMix([chat], [chat]).groups).toEqual([{ decoding: 1, samples: 2, medianMs: 20 }]);
  });

  it('is 1 with no samples', () => {
    expect(batchMix([], [])).toEqual({ groups: [], ratio: 1 });
  });
});
