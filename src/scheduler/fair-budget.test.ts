// The shared step budget as the plan applies it (defences 58 and 59): a tenant's head the budget
// leaves no time for does not stop another tenant's short prompt from starting in the same step,
// and a shared step's first chunk has the shared floor, not the lone tenant's 16 tokens.
import { describe, expect, it } from 'vitest';
import { FaultSet, type BatchItem } from '../core/index.js';
import { SchedulerHarness, type HarnessOptions } from '../../test/sim/scheduler-runner.js';
import { StepBudget, tokenCap, type PrefillLimit, type StepBudgetOptions, type StepShape } from './step-budget.js';

const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
const brief = (items: readonly BatchItem[]): string[] =>
  items.map((i) => `${i.rid}@${i.startPos}+${i.tokens.length}${i.wantLogits ? '!' : ''}`);

describe("another tenant's short prompt beside a head the shared budget leaves no time for", () => {
  // Beside decodes 16 prefill tokens, 8 while shared; prompts of at most 32 tokens are not split.
  const limit: PrefillLimit = {
    ...tokenCap(() => 16),
    maxSharedChunk: (s) => 8 - (s.numTokens - s.numDecodes),
    shortPromptTokens: 32,
  };

  /**
   * B's first chat (20 tokens, 10 out) beside A's a1 leaves B's counter above A's; then A queues
   * two long prompts and B a 3-token one: the plan of the step after.
   */
  const run = (o: HarnessOptions): string[] => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 64, numPages: 400, contextLength: 1024, cache: false, ...o });
    h.admit('a1', 'A', range(100, 4), 60);
    h.admit('b0', 'B', range(900, 20), 10);
    while (!h.ended.has('b0' as never)) h.step(limit);
    h.admit('a2', 'A', range(200, 600), 2);
    h.admit('a3', 'A', range(300, 600), 2);
    h.admit('b1', 'B', range(950, 3), 2);
    return brief(h.step(limit).plan.items);
  };

  it('starts it in this step, after A (smaller counter) took the shared budget (fault budget-closes-admission: a later step)', () => {
    // A's counter is the smaller: a2 starts first and takes the shared 8 tokens; a3 gets none.
    expect(run({})).toEqual(['a1@13+1!', 'a2@0+8', 'b1@0+3!']);
    expect(run({ faults: new FaultSet(['budget-closes-admission']) })).toEqual(['a1@13+1!', 'a2@0+8']);
  });
});

describe("a shared step's floor (m100's costs: a 16-token floor outlasted the 10 ms shared budget)", () => {
  // ms = 3 + 0.7 per token + 0.00054 per attention pair, fitted from steps of several shapes.
  const cost = (numTokens: number, numPairs: number): number => 3 + 0.7 * numTokens + 0.00054 * numPairs;
  const fitted = (options: StepBudgetOptions = {}): StepBudget => {
    const budget = new StepBudget(options);
    const shapes: [number, number, number][] = [
      [1, 501, 1],
      [13, 5400, 0],
      [23, 276, 0],
      [2, 1002, 2],
      [6, 2500, 0],
      [1, 501, 1],
    ];
    for (const [numTokens, numPairs, numDecodes] of shapes) {
      budget.observe(numTokens, cost(numTokens, numPairs), numDecodes, numPairs);
    }
    return budget;
  };
  // One decode at position 500 (3.97 ms), a chunk from position 400.
  const step: StepShape = { numTokens: 1, numPairs: 501, numDecodes: 1, numDecodePairs: 501 };
  const stepMs = (n: number): number => cost(1 + n, 501 + n * 400 + (n * (n + 1)) / 2);

  it('keeps a chunk beside a decode within the shared 10 ms (fault loose-shared-budget: the usual 20 ms)', () => {
    const budget = fitted();
    expect([budget.budgetMs(1, 501, true), budget.budgetMs(1, 501)]).toEqual([10, 20]);
    const [shared, loose] = [budget.maxSharedChunk(step, 400), budget.maxSharedChunk(step, 400, true)];
    expect([shared, loose]).toEqual([6, 17]);
    expect(stepMs(shared)).toBeLessThanOrEqual(10);
    // With the lone tenant's floor (16 tokens from position 0: 11.3 ms), as before: 12 tokens, a 15 ms step.
    const before = fitted({ minSharedPrefillTokens: 16 }).maxSharedChunk(step, 400);
    expect(before).toBe(12);
    expect(stepMs(before)).toBeGreaterThan(14);
    expect(stepMs(loose)).toBeGreaterThan(19);
  });

  it('still gives a step whose decodes spent the shared budget some prefill (4 tokens from position 0, at least one)', () => {
    const budget = fitted({ maxStepMs: 4 });
    expect([budget.maxSharedChunk(step, 0), budget.maxSharedChunk(step, 400)]).toEqual([4, 3]);
    expect(() => new StepBudget({ minSharedPrefillTokens: 0 })).toThrow(RangeError);
  });
});
