import { describe, expect, it } from 'vitest';
import { bestDraftLength, SpecCost } from './spec-cost.js';
import { DEFAULT_SPEC, DraftState } from './spec-lookup.js';

/** A text that repeats with period 3: prompt lookup always finds a draft for it. */
const REPEATING = Array.from({ length: 60 }, (_, i) => 10 + (i % 3));

/** Steps of a request whose drafts the target accepts `accept(step, k)` of; how many steps drafted. */
function drive(state: DraftState, steps: number, accept: (k: number) => number): { drafting: number; maxK: number } {
  let drafting = 0;
  let maxK = 0;
  for (let s = 0; s < steps; s++) {
    const draft = state.propose(REPEATING, 8);
    if (draft.length === 0) continue;
    drafting++;
    maxK = Math.max(maxK, draft.length);
    state.observe(draft.length, accept(draft.length));
  }
  return { drafting, maxK };
}

/** A SpecCost fitted to steps whose every token costs `perToken` ms beside `fixed` ms. */
function costOf(fixed: number, perToken: number): SpecCost {
  const cost = new SpecCost();
  for (let i = 0; i < 20; i++) for (const n of [1, 2, 5]) cost.observe(n, fixed + perToken * n);
  return cost;
}

describe('speculation pays or stops (spec-cost.ts, spec-lookup.ts)', () => {
  it("plainMs: a one-token step's ms by the fit (the draft model's cost ratio divides by it, not by a verify step)", () => {
    expect(new SpecCost().plainMs()).toBeUndefined();
    expect(costOf(2, 3).plainMs()).toBeCloseTo(5, 6);
    expect(costOf(2, 3).ratio(4)).toBeCloseTo(17 / 5, 6); // a verify step of 5 rows: 3.4 plain steps
  });

  it('bestDraftLength: none when nothing is accepted, the most when rows are cheap and drafts accepted', () => {
    const cheap = (k: number) => 1 + 0.05 * k;
    expect(bestDraftLength(0, 4, cheap, 0)).toBe(0);
    expect(bestDraftLength(0.9, 4, cheap, 0)).toBe(4);
    // Every row a whole step: even 90% acceptance does not pay.
    expect(bestDraftLength(0.9, 4, (k) => 1 + k, 0)).toBe(0);
    // A draft model costing 0.6 steps a token needs more acceptance than lookup does.
    expect(bestDraftLength(0.5, 4, cheap, 0)).toBeGreaterThan(0);
    expect(bestDraftLength(0.5, 4, cheap, 0.6)).toBe(0);
  });

  it('SpecCost: C(k) from the measured steps, unknown before steps of two sizes', () => {
    const cost = new SpecCost();
    for (let i = 0; i < 5; i++) cost.observe(1, 10);
    expect(cost.ratio(1)).toBeUndefined();
    expect(costOf(10, 5).ratio(2)).toBeCloseTo(25 / 15, 3);
  });

  it('a request whose drafts are all rejected cools down at k = 1 too (it drafted on forever before)', () => {
    const { drafting } = drive(new DraftState(DEFAULT_SPEC), 250, () => 0);
    // A few steps of evidence, then one probe per cool-down (8, 16, 32, 64, 128 steps).
    expect(drafting).toBeLessThanOrEqual(10);
  });

  it('the measured cost caps the draft length: accepted drafts on cheap rows grow to maxDraft, on dear rows stop', () => {
    const all = (k: number) => k;
    expect(drive(new DraftState(DEFAULT_SPEC, 0, costOf(10, 0.5)), 40, all)).toEqual({ drafting: 40, maxK: 4 });
    // Rows that cost a whole step each: accepting 1 of k (about 50% per token) never pays.
    const dear = drive(new DraftState(DEFAULT_SPEC, 0, costOf(0, 10)), 250, () => 1);
    expect(dear.drafting).toBeLessThanOrEqual(16); // a probe that accepts its one draft earns a step or two more
    // Without the measured cost the same acceptance keeps drafting (above minAcceptance 0.2).
    expect(drive(new DraftState(DEFAULT_SPEC), 250, () => 1).drafting).toBeGreaterThan(200);
  });

  it('with the measured cost a rejection does not reset the draft length: the model picks it at the per-token acceptance', () => {
    /** Drafted tokens over 40 steps where every 5th step's second draft is rejected (about 95% per token). */
    const drafted = (state: DraftState) => {
      let total = 0;
      for (let s = 0; s < 40; s++) {
        const draft = state.propose(REPEATING, 8);
        total += draft.length;
        state.observe(draft.length, s % 5 === 4 ? Math.min(1, draft.length) : draft.length);
      }
      return total;
    };
    // Cheap rows: k = maxDraft (4) but for the first steps' climb; without the cost each rejection
    // falls back to accepted + 1 = 2 and climbs back one a step.
    expect(drafted(new DraftState(DEFAULT_SPEC, 0, costOf(10, 0.5)))).toBeGreaterThanOrEqual(150);
    expect(drafted(new DraftState(DEFAULT_SPEC))).toBeLessThan(140);
  });
});
