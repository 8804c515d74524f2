// The tier checks' verdicts, pure: timingVerdict (two KS tests: a finding only from the
// cross-tenant arm; clean only when the positive control sees the cache, else inconclusive) and
// orderCount (the binomial tail of "A's prompt finished first").
import { describe, expect, it } from 'vitest';
import { Rng } from '../core/index.js';
import type { CheckContext } from './context.js';
import { orderCount, responseOrder } from './pair-checks.js';
import type { PairOutcome } from './pair-trials.js';
import type { RequestRecord, Tenant } from './types.js';
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

// response-order's trials against a scripted server: in A's i-th pair the request with A's prompt finishes first
// when aWins(i); in B's pairs, every other time. The check (pair-checks.ts) adds trials while A's order is not
// yet significant.
function scriptedServer(aWins: (pair: number) => boolean): CheckContext {
  let id = 0;
  const calls = { control: 0, cross: 0 };
  const client = {
    async stream(tenant: Tenant, purpose: string, body: Record<string, unknown>): Promise<RequestRecord> {
      const arm = purpose.split(': ')[1] as string; // 'response-order: control: A's prompt'
      let totalMs = 50;
      if (arm === 'control' || arm === 'cross') {
        const pair = Math.floor(calls[arm]++ / 2);
        const hitWins = arm === 'control' ? aWins(pair) : pair % 2 === 0;
        totalMs = purpose.endsWith("A's prompt") === hitWins ? 10 : 90;
      }
      const r = { id: ++id, check: 'response-order', tenant, method: 'POST', path: '/v1/completions', body, purpose };
      return { ...r, startMs: 0, status: 200, ttftMs: 1, totalMs } as RequestRecord;
    },
  };
  return {
    client: client as unknown as CheckContext['client'],
    facts: { model: 'm', contextLength: 256, contextSource: 'test', poolLimit: null, sameKey: false },
    rng: new Rng(7),
    budget: 1,
    batchInvariant: true,
    progress: () => {},
  };
}

describe('response-order trials', () => {
  it('stops at the planned 20 trials when A always sees its own hit first', async () => {
    const out = await responseOrder(scriptedServer(() => true));
    const f = out.figures as { trials: number; control: { hitFirst: number; n: number }; cross: { hitFirst: number } };
    expect([out.status, f.trials, f.control.hitFirst, f.control.n, f.cross.hitFirst]).toEqual([
      'clean',
      20,
      20,
      20,
      10,
    ]);
  });
  it('goes on, ten trials at a time, while the control is not yet significant, and stops once it is', async () => {
    // A's hit loses every 3rd of the first 20 pairs (14/20, p 0.058), then none (24/30, p 0.0007): 30 trials ...
    const late = await responseOrder(scriptedServer((i) => i >= 20 || i % 3 !== 2));
    expect([late.status, (late.figures as { trials: number }).trials]).toEqual(['clean', 30]);
    // ... every 3rd throughout (14/20; 20/30, p 0.049; 27/40, p 0.019): 40 trials, the most, then inconclusive.
    const weak = await responseOrder(scriptedServer((i) => i % 3 !== 2));
    const f = weak.figures as { trials: number; control: { n: number; pValue: number } };
    expect([weak.status, f.trials, f.control.n]).toEqual(['inconclusive', 40, 40]);
    expect(f.control.pValue).toBeGreaterThan(0.01);
  });
});
