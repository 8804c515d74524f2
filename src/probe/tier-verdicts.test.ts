// The tier checks' verdicts, pure: timingVerdict (two KS tests: a finding only from the
// cross-tenant arm; clean only when the positive control sees the cache, else inconclusive) and
// orderCount (the binomial tail of "A's prompt finished first").
import { describe, expect, it } from 'vitest';
import { orderCount } from './pair-checks.js';
import type { PairOutcome } from './pair-trials.js';
import { timingVerdict, type TimingArm } from './timing-verdict.js';

const FAST = [10, 11, 12, 13, 14, 15, 16, 17];
const SLOW = [100, 101, 102, 103, 104, 105, 106, 107];
const MIXED = [10, 101, 12, 103, 14, 105, 16, 107];
const words = {
  cache: 'test',
  leak: '(shared)',
  series: { baseline: 'b', control: 'c', cross: 'x', fresh: 'f' },
  plotTitle: 't',
};
const ids = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
function verdict(t: Record<TimingArm, number[]>) {
  const id = { baseline: ids(8), control: ids(8), cross: ids(8), fresh: ids(8) };
  return timingVerdict({ ttftMs: t, ids: id, failed: [] }, words);
}

describe('timingVerdict', () => {
  it('is clean when the control sees the cache and the cross-tenant arm does not', () => {
    const v = verdict({ baseline: SLOW, control: FAST, cross: MIXED, fresh: MIXED });
    expect(v.status).toBe('clean');
    expect((v.figures['control'] as { pValue: number }).pValue).toBeLessThan(1e-3);
  });

  it('is a finding when the cross-tenant arm is faster, naming its requests', () => {
    const v = verdict({ baseline: SLOW, control: FAST, cross: FAST, fresh: SLOW });
    expect(v.status).toBe('finding');
    expect(v.findings[0]?.what).toMatch(/\(shared\)/);
    expect(v.findings[0]?.requests).toEqual(ids(8));
  });

  it('is inconclusive, never clean, when the control does not see a cache', () => {
    expect(verdict({ baseline: MIXED, control: MIXED, cross: MIXED, fresh: MIXED }).status).toBe('inconclusive');
  });

  it('is an error when an arm has fewer than 3 samples', () => {
    expect(verdict({ baseline: SLOW, control: [1, 2], cross: MIXED, fresh: MIXED }).status).toBe('error');
  });
});

describe('orderCount', () => {
  const o = (first: PairOutcome['first'], hitLaunchedFirst = true): PairOutcome => ({
    hitTtft: 1,
    freshTtft: 2,
    hitId: 1,
    freshId: 2,
    first,
    hitLaunchedFirst,
  });
  it('counts decided pairs only and gives the binomial tail at 1/2', () => {
    const c = orderCount([...Array.from({ length: 18 }, () => o('hit')), o('fresh', false), o('tie'), o('failed')]);
    expect(c).toMatchObject({ hitFirst: 18, freshFirst: 1, ties: 1, failed: 1, n: 19, launchedFirstWon: 19 });
    expect(c.pValue).toBeCloseTo(20 / 2 ** 19, 12); // P(X >= 18), X ~ Binomial(19, 1/2)
  });
});
