// The step cost model's attention term: a chunk's cost grows with the positions it attends over,
// so a late chunk of a long prompt is priced higher than an early one of the same size.
import { describe, expect, it } from 'vitest';
import { SchedulerHarness } from '../../test/sim/scheduler-runner.js';
import type { BatchItem } from '../core/index.js';
import { itemPairs, StepBudget, StepCostModel, type PrefillLimit, type StepShape } from './step-budget.js';

/** A machine whose step costs 10 ms, 0.5 ms per token and 2 µs per attention pair. */
const machine = (numTokens: number, numPairs: number): number => 10 + 0.5 * numTokens + 0.002 * numPairs;

/** A step's tokens and pairs, as the engine loop counts them. */
const shapeOf = (items: readonly BatchItem[]): { numTokens: number; numPairs: number; numDecodes: number } => ({
  numTokens: items.reduce((n, i) => n + i.tokens.length, 0),
  numPairs: items.reduce((n, i) => n + itemPairs(i.startPos, i.tokens.length), 0),
  numDecodes: items.filter((i) => i.tokens.length === 1).length,
});

describe('attention pairs', () => {
  it('count every key each query reads: a decode reads its context and itself', () => {
    expect(itemPairs(0, 1)).toBe(1);
    expect(itemPairs(99, 1)).toBe(100);
    expect(itemPairs(0, 3)).toBe(1 + 2 + 3);
    expect(itemPairs(10, 3)).toBe(11 + 12 + 13);
  });
});

describe('the step cost model with pairs', () => {
  const mixedSteps: [number, number][] = [
    [8, itemPairs(150, 1) * 8],
    [8 + 64, itemPairs(150, 1) * 8 + itemPairs(0, 64)],
    [8 + 64, itemPairs(150, 1) * 8 + itemPairs(640, 64)],
    [8 + 32, itemPairs(150, 1) * 8 + itemPairs(900, 32)],
    [256, itemPairs(256, 256)],
  ];

  it('recovers the fixed cost, the per-token cost and the per-pair cost', () => {
    const m = new StepCostModel();
    for (const [t, p] of mixedSteps) m.observe(t, machine(t, p), p);
    const fit = m.fit()!;
    expect(fit.fixedMs).toBeCloseTo(10, 6);
    expect(fit.msPerToken).toBeCloseTo(0.5, 6);
    expect(fit.msPerPair).toBeCloseTo(0.002, 9);
  });

  it('falls back to the line in tokens where pairs move with tokens alone', () => {
    const m = new StepCostModel();
    // Every item reads 100 keys: pairs are exactly 100 x tokens.
    for (const t of [4, 8, 16, 4, 8]) m.observe(t, 10 + 0.7 * t, 100 * t);
    const fit = m.fit()!;
    expect(fit.msPerPair).toBe(0);
    expect(fit.msPerToken).toBeCloseTo(0.7, 6);
    expect(fit.fixedMs).toBeCloseTo(10, 6);
  });

  it('never prices a pair below zero: noise that says so leaves the line', () => {
    const m = new StepCostModel();
    for (const [t, p] of mixedSteps) m.observe(t, 10 + 0.5 * t - 0.001 * p, p);
    expect(m.fit()!.msPerPair).toBe(0);
  });
});

describe('the step budget with pairs', () => {
  const calibrated = (o: ConstructorParameters<typeof StepBudget>[0] = {}): StepBudget => {
    const b = new StepBudget(o);
    for (const [t, p] of [
      [8, 1208],
      [72, 3288],
      [72, 45_288],
      [40, 30_536],
      [256, 98_432],
    ] as const)
      b.observe(t, machine(t, p), t === 8 ? 8 : undefined, p);
    return b;
  };
  const decodes = (n: number, context: number): StepShape => ({
    numTokens: n,
    numPairs: n * itemPairs(context, 1),
    numDecodes: n,
    numDecodePairs: n * itemPairs(context, 1),
  });

  it('gives a chunk late in a long prompt fewer tokens than one at its start, each the most that fits the budget', () => {
    const b = calibrated({ maxStepMs: 100 });
    const step = decodes(8, 150);
    const early = b.maxChunk(step, 0);
    const late = b.maxChunk(step, 800);
    expect(late).toBeLessThan(early);
    for (const [startPos, n] of [
      [0, early],
      [800, late],
    ] as const) {
      const ms = (k: number) => machine(step.numTokens + k, step.numPairs + itemPairs(startPos, k));
      expect(ms(n)).toBeLessThanOrEqual(100 + 1e-9);
      expect(ms(n + 1)).toBeGreaterThan(100);
    }
  });

  it('counts the chunks already in the step: none more once they spent the budget', () => {
    const b = calibrated({ maxStepMs: 100 });
    const step = decodes(8, 150);
    const first = b.maxChunk(step, 0);
    const after: StepShape = {
      ...step,
      numTokens: step.numTokens + first,
      numPairs: step.numPairs + itemPairs(0, first),
    };
    expect(b.maxChunk(after, 0)).toBe(0);
    expect(b.maxChunk(after, 500)).toBe(0);
  });

  it("never starves prefill: a spent budget still takes the time of 16 tokens at a prompt's start, and one token at least", () => {
    const b = calibrated({ maxStepMs: 11 }); // the 8 decodes alone are predicted over 11 ms
    const step = decodes(8, 150);
    expect(b.maxChunk(step, 0)).toBe(16);
    // At position 500 those 8.27 ms buy 5 tokens: 0.5 * 5 + 0.002 * itemPairs(500, 5) = 7.53 ms.
    const floorMs = 0.5 * 16 + 0.002 * itemPairs(0, 16);
    expect(b.maxChunk(step, 500)).toBe(5);
    expect(0.5 * 5 + 0.002 * itemPairs(500, 5)).toBeLessThanOrEqual(floorMs);
    expect(0.5 * 6 + 0.002 * itemPairs(500, 6)).toBeGreaterThan(floorMs);
    expect(b.maxChunk(step, 100_000)).toBe(1);
    expect(calibrated({ maxStepMs: 11, minPrefillTokens: 4 }).maxChunk(step, 0)).toBe(4);
    // A second chunk in a spent step gets nothing: the floor is the step's, not each chunk's.
    expect(b.maxChunk({ ...step, numTokens: step.numTokens + 16, numPairs: step.numPairs + itemPairs(0, 16) }, 0)).toBe(
      0,
    );
  });

  it("holds a long prompt's late chunks to the budget, where the line in tokens alone lets them run over", () => {
    // 7 chats decode at ~150 positions while a 940-token prompt is prefilled beside them, on a
    // machine whose attention pairs cost; each step's ms (the machine's) goes to the budget, as
    // the engine loop does. Control: the same run with the pairs withheld from the cost model.
    const run = (withPairs: boolean): number[] => {
      const h = new SchedulerHarness({
        chunkedPrefillSize: 256,
        numPages: 400,
        pageSize: 16,
        contextLength: 2048,
        maxRunningRequests: 16,
        cache: false,
      });
      const budget = new StepBudget({ maxStepMs: 60 });
      const limit: PrefillLimit = budget;
      for (let i = 0; i < 7; i++)
        h.admit(
          `chat${i}`,
          't1',
          Array.from({ length: 150 }, (_, j) => 3 + i + j),
          400,
        );
      const over: number[] = [];
      for (let s = 0; s < 200; s++) {
        if (s === 10)
          h.admit(
            'long',
            't2',
            Array.from({ length: 940 }, (_, j) => 5 + j),
            4,
          );
        const { plan } = h.step(limit);
        const { numTokens, numPairs, numDecodes } = shapeOf(plan.items);
        if (numTokens === 0) continue;
        const ms = machine(numTokens, numPairs);
        budget.observe(numTokens, ms, numDecodes, withPairs ? numPairs : 0);
        if (numDecodes > 0 && numTokens > numDecodes && s > 20) over.push(ms / 60);
      }
      expect(h.ended.get('long' as never)?.kind).toBe('finished');
      return over;
    };
    const priced = run(true);
    const line = run(false);
    expect(priced.length).toBeGreaterThan(0);
    expect(Math.max(...priced)).toBeLessThanOrEqual(1.05);
    expect(Math.max(...line)).toBeGreaterThan(1.2);
  });
});

describe('the plan under a priced step budget', () => {
  it("asks the limit with each chunk's own start position and the step planned so far", () => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 32, numPages: 40, cache: false });
    h.admit('a', 't1', [1, 2, 3], 20);
    h.step();
    h.admit(
      'long',
      't1',
      Array.from({ length: 40 }, (_, i) => 100 + i),
      2,
    );
    const asked: [StepShape, number][] = [];
    const limit: PrefillLimit = {
      maxChunk: (step, startPos) => {
        asked.push([step, startPos]);
        return startPos >= 12 ? 3 : 6;
      },
    };
    const brief = (items: readonly BatchItem[]) => items.map((i) => `${i.rid}@${i.startPos}+${i.tokens.length}`);
    expect(brief(h.step(limit).plan.items)).toEqual(['a@3+1', 'long@0+6']);
    expect(brief(h.step(limit).plan.items)).toEqual(['a@4+1', 'long@6+6']);
    expect(brief(h.step(limit).plan.items)).toEqual(['a@5+1', 'long@12+3']);
    expect(asked.at(-1)).toEqual([{ numTokens: 1, numPairs: 6, numDecodes: 1, numDecodePairs: 6 }, 12]);
  });
});
