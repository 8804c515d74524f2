import { describe, expect, it } from 'vitest';
import { SchedulerHarness } from '../../test/sim/scheduler-runner.js';
import { StepBudget, StepCostModel } from './step-budget.js';
import type { BatchItem } from '../core/index.js';

const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
const brief = (items: readonly BatchItem[]): string[] =>
  items.map((i) => `${i.rid}@${i.startPos}+${i.tokens.length}${i.wantLogits ? '!' : ''}`);

/** A machine whose step takes 10 ms plus 0.5 ms per token. */
const machine = (numTokens: number): number => 10 + 0.5 * numTokens;

describe('the step cost model', () => {
  it('has no fit from steps of one size, and recovers the line once two sizes were seen', () => {
    const m = new StepCostModel();
    for (let i = 0; i < 5; i++) m.observe(8, machine(8));
    expect(m.fit()).toBeUndefined();
    m.observe(256, machine(256));
    const fit = m.fit();
    expect(fit?.fixedMs).toBeCloseTo(10, 6);
    expect(fit?.msPerToken).toBeCloseTo(0.5, 6);
  });

  it('keeps its last fit through a run of steps of one size (decodes only, between prompts)', () => {
    const m = new StepCostModel(0.8);
    for (const n of [8, 256]) m.observe(n, machine(n));
    const fit = m.fit();
    for (let i = 0; i < 200; i++) m.observe(8, machine(8));
    expect(m.fit()).toEqual(fit);
  });

  it('follows the machine when it slows down: older steps weigh less', () => {
    const m = new StepCostModel(0.8);
    for (const n of [8, 256, 8, 256]) m.observe(n, machine(n));
    for (let i = 0; i < 30; i++) for (const n of [8, 256]) m.observe(n, 2 * machine(n));
    expect(m.fit()?.msPerToken).toBeCloseTo(1, 2);
  });

  it('ignores steps without tokens or with a broken measurement', () => {
    const m = new StepCostModel();
    m.observe(0, 5);
    m.observe(10, Number.NaN);
    m.observe(10, -1);
    expect(m.fit()).toBeUndefined();
  });
});

describe('the step budget', () => {
  const calibrated = (o: ConstructorParameters<typeof StepBudget>[0] = {}): StepBudget => {
    const b = new StepBudget(o);
    for (const n of [8, 256, 8, 128]) b.observe(n, machine(n));
    return b;
  };

  it('puts no cap on a step without decodes; before it can predict, a cautious one beside decodes', () => {
    expect(calibrated().prefillCap(0)).toBe(Infinity);
    expect(new StepBudget().prefillCap(0)).toBe(Infinity);
    expect(new StepBudget().prefillCap(8)).toBe(32);
    expect(new StepBudget({ uncalibratedPrefillTokens: 64 }).prefillCap(8)).toBe(64);
    const b = new StepBudget();
    for (let i = 0; i < 5; i++) b.observe(256, machine(256)); // full chunks only: still no slope
    expect(b.prefillCap(8)).toBe(32);
  });

  it('with a fixed budget, caps prefill at what fits beside the decodes', () => {
    // 60 ms = 10 + 0.5 * (8 decodes + 92 prefill tokens)
    expect(calibrated({ maxStepMs: 60 }).prefillCap(8)).toBe(92);
  });

  it('by default lets prefill at most double the decodes-only step time', () => {
    // decodes alone: 10 + 0.5 * 8 = 14 ms; budget max(20, 28) = 28 ms -> (28 - 10) / 0.5 - 8 = 28 tokens
    expect(calibrated().prefillCap(8)).toBe(28);
    // 32 decodes: 26 ms alone, budget 52 ms -> 84 - 32 = 52 tokens
    expect(calibrated().prefillCap(32)).toBe(52);
  });

  it("does not let the line's drift raise the budget above twice the measured decode-only step", () => {
    // Decode-only steps of 7 decodes take 50 ms; mixed steps cost more than any line in tokens
    // says (a long prompt's late chunks), so the fitted fixedMs drifts far above 50 ms.
    const feed = (b: StepBudget, markDecodes: boolean) => {
      for (let i = 0; i < 3; i++) b.observe(7, 50, markDecodes ? 7 : undefined);
      for (let i = 0; i < 40; i++) for (const n of [23, 68]) b.observe(n, 80 + 1.5 * n + (n > 30 ? 40 : 0));
    };
    const drifted = new StepBudget();
    feed(drifted, false);
    const anchored = new StepBudget();
    feed(anchored, true);
    const fit = anchored.model.fit()!;
    expect(fit.fixedMs).toBeGreaterThan(50);
    // Without decode-only steps marked: 2x the line (~150 ms here), and a cap of ~30 tokens.
    expect(drifted.budgetMs(7)).toBeCloseTo(2 * (fit.fixedMs + 7 * fit.msPerToken), 6);
    expect(drifted.budgetMs(7)).toBeGreaterThan(140);
    expect(drifted.prefillCap(7)).toBeGreaterThan(anchored.prefillCap(7));
    // With them: 2 x 50 ms, and what fits beside 7 decodes under it (the minimum chunk here).
    expect(anchored.budgetMs(7)).toBeCloseTo(100, 6);
    expect(anchored.prefillCap(7)).toBe(Math.max(16, Math.floor((100 - fit.fixedMs) / fit.msPerToken - 7)));
    // More decodes than the measured steps had: the measured time scaled up (100 ms for 14), or
    // the line where that is less.
    expect(anchored.budgetMs(14)).toBeCloseTo(2 * Math.min(100, fit.fixedMs + 14 * fit.msPerToken), 6);
  });

  it('never starves prefill: a budget already spent by decodes still leaves the minimum chunk', () => {
    expect(calibrated({ maxStepMs: 11 }).prefillCap(8)).toBe(16);
    expect(calibrated({ maxStepMs: 11, minPrefillTokens: 4 }).prefillCap(8)).toBe(4);
  });

  it('refuses nonsense options', () => {
    expect(() => new StepBudget({ maxStepMs: 0 })).toThrow(RangeError);
    expect(() => new StepBudget({ autoFactor: 0.5 })).toThrow(RangeError);
    expect(() => new StepBudget({ minPrefillTokens: 0 })).toThrow(RangeError);
    expect(() => new StepBudget({ uncalibratedPrefillTokens: 1.5 })).toThrow(RangeError);
  });
});

describe('the plan under a step budget', () => {
  it("caps a long prompt's chunk beside running decodes, keeps every decode, and takes the whole chunk when alone", () => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 32, numPages: 40, cache: false });
    h.admit('a', 't1', range(0, 3), 20);
    h.admit('b', 't2', range(10, 3), 20);
    h.step(); // a and b prefilled: both decode from now on
    h.admit('long', 't1', range(100, 40), 2);
    const cap = (numDecodes: number): number => (numDecodes === 0 ? Infinity : 6);
    expect(brief(h.step(cap).plan.items)).toEqual(['a@3+1!', 'b@3+1!', 'long@0+6']);
    expect(brief(h.step(cap).plan.items)).toEqual(['a@4+1!', 'b@4+1!', 'long@6+6']);
    h.admit('c', 't1', range(50, 40), 2); // long's tenant: its running chunk goes first (across tenants: fair-share.test.ts)
    expect(brief(h.step(cap).plan.items)).toEqual(['a@5+1!', 'b@5+1!', 'long@12+6']);
  });

  it('without decodes a prompt gets the whole token budget, whatever the cap says about decodes', () => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 32, numPages: 40, cache: false });
    h.admit('long', 't1', range(100, 40), 2);
    expect(brief(h.step(() => 6).plan.items)).toEqual(['long@0+32']);
  });

  it('a request that completes its prompt in a capped step decodes in the next: decodes never starve', () => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 32, numPages: 40, cache: false });
    h.admit('a', 't1', range(0, 3), 30);
    h.step();
    h.admit('b', 't2', range(10, 10), 3);
    const cap = (): number => 4;
    const steps = Array.from({ length: 4 }, () => brief(h.step(cap).plan.items));
    expect(steps).toEqual([
      ['a@3+1!', 'b@0+4'],
      ['a@4+1!', 'b@4+4'],
      ['a@5+1!', 'b@8+2!'],
      ['a@6+1!', 'b@10+1!'],
    ]);
    expect(h.runner.contentViolations).toEqual([]);
  });
});
