import { describe, expect, it } from 'vitest';
import { asTenantId, FaultSet, type BatchItem, type RequestId } from '../core/index.js';
import { SchedulerHarness, type HarnessOptions } from '../../test/sim/scheduler-runner.js';
import { TenantCounters } from './fair-share.js';
import { StepBudget, tokenCap, type PrefillLimit, type StepShape } from './step-budget.js';

const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
const brief = (items: readonly BatchItem[]): string[] =>
  items.map((i) => `${i.rid}@${i.startPos}+${i.tokens.length}${i.wantLogits ? '!' : ''}`);
const A = asTenantId('A');
const B = asTenantId('B');
const C = asTenantId('C');
const FCFS = new FaultSet(['no-tenant-fairness']);
const SPLIT = new FaultSet(['split-short-prompts']);

/** Steps until idle; the requests in the order they first got tokens. */
const startOrder = (h: SchedulerHarness): RequestId[] => {
  const started: RequestId[] = [];
  while (h.scheduler.numRunning + h.scheduler.numWaiting > 0) {
    for (const item of h.step().plan.items) if (item.startPos === 0) started.push(item.rid);
  }
  return started;
};

/** A queues three 12-token prompts, then B six 2-token prompts; one request runs at a time. */
const longAndShort = (o: HarnessOptions = {}): SchedulerHarness => {
  const h = new SchedulerHarness({ maxRunningRequests: 1, numPages: 20, cache: false, ...o });
  for (let i = 1; i <= 3; i++) h.admit(`a${i}`, 'A', range(100 * i, 12), 1);
  for (let i = 1; i <= 6; i++) h.admit(`b${i}`, 'B', range(1000 + 10 * i, 2), 1);
  return h;
};

describe('TenantCounters (the virtual token counter)', () => {
  it('charges prompt tokens at the input weight and output tokens at the output weight', () => {
    const counters = new TenantCounters({ inputWeight: 1, outputWeight: 2 });
    counters.join(A);
    counters.charge(A, 10, 'input');
    counters.charge(A, 3, 'output');
    expect(counters.counterOf(A)).toBe(16);
  });

  it('lifts a tenant that becomes active to the smallest active counter, so idle time banks no credit', () => {
    const counters = new TenantCounters();
    counters.join(A);
    counters.join(C);
    counters.charge(A, 900, 'input');
    counters.charge(C, 500, 'input');
    counters.join(B);
    expect(counters.counterOf(B)).toBe(500);
    counters.charge(B, 800, 'input');
    counters.leave(B);
    counters.join(B); // B still owes what it got beyond the others: no forgiveness by leaving
    expect(counters.counterOf(B)).toBe(1300);
  });

  it('forgets every counter when no tenant is active, and an idle one under the floor when it leaves', () => {
    const counters = new TenantCounters();
    counters.join(A);
    counters.join(B);
    counters.charge(A, 50, 'input');
    counters.leave(B);
    expect(counters.numCounters).toBe(1);
    counters.leave(A);
    counters.join(B);
    expect([counters.counterOf(A), counters.counterOf(B), counters.numCounters]).toEqual([0, 0, 1]);
  });

  it('keeps no more counters than twice the active tenants (plus 16) however many tenants came and went', () => {
    const counters = new TenantCounters();
    counters.join(A);
    for (let i = 0; i < 1000; i++) {
      const t = asTenantId(`t${i}`);
      counters.join(t);
      counters.charge(t, 10 + i, 'input'); // each owes service: kept while over the floor
      counters.leave(t);
      counters.charge(A, 2000, 'input');
    }
    expect(counters.numCounters).toBeLessThanOrEqual(2 * counters.numActive + 16);
  });

  it('picks the smallest counter, then the fewest tokens left, then the oldest', () => {
    const counters = new TenantCounters();
    counters.join(A);
    counters.join(B);
    counters.join(C);
    counters.charge(A, 5, 'input');
    const pick = (...cs: [typeof A, number, number][]): string | undefined =>
      counters.pick(cs.map(([tenant, numTokensLeft, order]) => ({ tenant, numTokensLeft, order })))?.tenant;
    expect(pick([A, 1, 0], [B, 9, 1])).toBe('B');
    expect(pick([B, 9, 0], [C, 3, 1])).toBe('C');
    expect(pick([C, 3, 1], [B, 3, 0])).toBe('B');
    expect(pick()).toBeUndefined();
  });
});

describe('fair sharing in the scheduler', () => {
  it("admits by tokens served: B's 2-token prompts run until B has had as many tokens as A's 12-token one", () => {
    // Counters tie at 0: the fewest tokens first (b1: B 2); then A's a1 (A 12); then B until it reaches 12.
    expect(startOrder(longAndShort())).toEqual(['b1', 'a1', 'b2', 'b3', 'b4', 'b5', 'b6', 'a2', 'a3']);
  });

  it('under the fault no-tenant-fairness, tenants take turns by requests (first come first served within each)', () => {
    expect(startOrder(longAndShort({ faults: FCFS }))).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'b3', 'b4', 'b5', 'b6']);
  });

  it("gives a new tenant's short prompt the step's budget before another tenant's running long prompt's next chunk", () => {
    const run = (o: HarnessOptions): string[][] => {
      const h = new SchedulerHarness({ chunkedPrefillSize: 8, numPages: 30, cache: false, ...o });
      h.admit('long', 'A', range(100, 40), 2);
      const first = brief(h.step().plan.items);
      h.admit('b', 'B', range(500, 5), 2);
      return [first, brief(h.step().plan.items), brief(h.step().plan.items)];
    };
    expect(run({})).toEqual([['long@0+8'], ['long@8+3', 'b@0+5!'], ['long@11+7', 'b@5+1!']]);
    expect(run({ faults: FCFS })).toEqual([['long@0+8'], ['long@8+8'], ['long@16+8']]);
  });

  it("another tenant's new request goes before a tenant's continuing prefill (FCFS, under the fault: after it)", () => {
    const run = (o: HarnessOptions): string[][] => {
      const h = new SchedulerHarness({ chunkedPrefillSize: 8, numPages: 20, cache: false, ...o });
      h.admit('a', 't1', range(0, 3), 5);
      h.step(); // a prefilled: t1 has 3
      h.admit('b', 't1', range(10, 12), 5);
      h.admit('c', 't2', range(30, 6), 5); // lifted to 3; a's decode brings t1 to 5
      return [brief(h.step().plan.items), brief(h.step().plan.items)];
    };
    expect(run({})).toEqual([
      ['a@3+1!', 'c@0+6!', 'b@0+1'],
      ['a@4+1!', 'c@6+1!', 'b@1+6'],
    ]);
    expect(run({ faults: FCFS })).toEqual([
      ['a@3+1!', 'b@0+7'],
      ['a@4+1!', 'b@7+5!', 'c@0+2'],
    ]);
  });

  it("orders several tenants' running chunks by their counters, one chunk per pick", () => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 8, numPages: 40, cache: false });
    h.admit('a', 'A', range(100, 40), 2);
    expect(brief(h.step().plan.items)).toEqual(['a@0+8']); // A: 8
    h.admit('b', 'B', range(200, 30), 2); // lifted to 8
    h.admit('c', 'C', range(300, 30), 2); // lifted to 8
    // All three at 8: the fewest tokens left goes first, B (30; C has as many but came later), then C (8 < A's 16), then A.
    expect(brief(h.step().plan.items)).toEqual(['b@0+8']);
    expect(brief(h.step().plan.items)).toEqual(['c@0+8']);
    expect(brief(h.step().plan.items)).toEqual(['a@8+8']);
    expect([A, B, C].map((t) => h.scheduler.tenantCounter(t))).toEqual([16, 16, 16]);
    h.scheduler.checkIntegrity();
  });

  it('keeps every admission rule: the running limit and the pages decide who may start, fairness only the order', () => {
    const h = new SchedulerHarness({ maxRunningRequests: 2, numPages: 6, chunkedPrefillSize: 64, cache: false });
    h.admit('a1', 'A', range(100, 8), 8); // 2 pages now, 4 with its output
    h.admit('a2', 'A', range(200, 8), 8);
    h.admit('b1', 'B', range(300, 3), 1);
    expect(brief(h.step().plan.items)).toEqual(['b1@0+3!', 'a1@0+8!']); // B's 3 tokens first; a2 waits for a slot
    expect(h.scheduler.view('a2' as RequestId)?.state).toBe('waiting');
    h.runUntilDone();
    expect(h.runner.contentViolations).toEqual([]);
    expect(h.runner.numPageCheckFailures).toBe(0);
  });
});

describe('short prompts beside decodes (the step budget does not split them)', () => {
  // A step budget of 16 prefill tokens beside decodes, short prompts up to 32 tokens.
  const limit: PrefillLimit = { ...tokenCap(() => 16), shortPromptTokens: 32 };

  /** A decodes a1 and prefills a2's 200 tokens; B's 24-token chat (and C's, when given) arrive: the next two plans. */
  const run = (o: HarnessOptions, withC = false): string[][] => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 64, numPages: 80, contextLength: 256, cache: false, ...o });
    h.admit('a1', 'A', range(100, 4), 30);
    h.step(limit);
    h.admit('a2', 'A', range(200, 200), 2);
    expect(brief(h.step(limit).plan.items)).toEqual(['a1@4+1!', 'a2@0+16']);
    h.admit('b', 'B', range(500, 24), 2);
    if (withC) h.admit('c', 'C', range(600, 24), 2);
    return [brief(h.step(limit).plan.items), brief(h.step(limit).plan.items)];
  };

  it("takes another tenant's short prompt whole in its first step, so its first token comes one step after it (fault split-short-prompts: two)", () => {
    expect(run({})).toEqual([
      ['a1@5+1!', 'b@0+24!'],
      ['a1@6+1!', 'a2@16+16', 'b@24+1!'],
    ]);
    expect(run({ faults: SPLIT })).toEqual([
      ['a1@5+1!', 'b@0+16'],
      ['a1@6+1!', 'a2@16+16'],
    ]);
  });

  it("keeps a step's prefill beside decodes within the short-prompt bound: a second short prompt gets the rest", () => {
    expect(run({}, true)[0]).toEqual(['a1@5+1!', 'b@0+24!', 'c@0+8']);
  });

  it('splits a long prompt as before, and a short one when nothing decodes has no cap anyway', () => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 64, numPages: 80, contextLength: 256, cache: false });
    h.admit('b', 'B', range(500, 24), 2);
    expect(brief(h.step(limit).plan.items)).toEqual(['b@0+24!']);
    h.admit('a', 'A', range(100, 40), 2);
    expect(brief(h.step(limit).plan.items)).toEqual(['b@24+1!', 'a@0+16']);
  });

  it('StepBudget: short prompts up to 32 tokens by default, a positive integer when set', () => {
    expect(new StepBudget().shortPromptTokens).toBe(32);
    expect(new StepBudget({ shortPromptTokens: 8 }).shortPromptTokens).toBe(8);
    expect(() => new StepBudget({ shortPromptTokens: 0 })).toThrow(RangeError);
  });
});

describe('steps without decodes while tenants share the node (budgeted, not a whole chunk)', () => {
  const limit: PrefillLimit = { ...tokenCap(() => 16), maxSharedChunk: () => 8 };

  /**
   * A's 900-token prompt alone, then B's 3-token request (one token out) beside it: the size of
   * A's chunk in each of `plans` plans after. Steps of 100 ms unless `o.stepMs` says otherwise
   * (the window's second of steps passes within its 16 plans).
   */
  const run = (o: HarnessOptions, plans = 17): number[] => {
    const h = new SchedulerHarness({
      chunkedPrefillSize: 32,
      numPages: 300,
      contextLength: 1024,
      cache: false,
      stepMs: 100,
      ...o,
    });
    h.admit('a', 'A', range(100, 900), 2);
    const sizes: number[] = [];
    const step = (): void => {
      const items = h.step(limit).plan.items;
      sizes.push(items.find((i) => i.rid === ('a' as RequestId))?.tokens.length ?? 0);
      // Prefill role: decode's Ack for B's transfer comes right after it (B's request leaves the node).
      if (h.scheduler.view('b' as RequestId)?.state === 'held') h.scheduler.release('b' as RequestId);
    };
    step();
    h.admit('b', 'B', range(5000, 3), 1);
    for (let i = 0; i < plans; i++) step();
    expect(h.ended.get('b' as RequestId)?.kind).toBe(o.role === 'prefill' ? 'prefilled' : 'finished');
    return sizes;
  };

  it('caps them while two tenants have requests and for the rest of 16 plans after (fault unbounded-shared-steps: whole chunks)', () => {
    expect(run({})).toEqual([32, ...Array.from({ length: 16 }, () => 8), 32]);
    const whole = run({ faults: new FaultSet(['unbounded-shared-steps']) });
    expect(whole).toEqual([32, 29, ...Array.from({ length: 16 }, () => 32)]);
  });

  it('does so on a prefill worker too (fault unbounded-shared-steps: whole chunks)', () => {
    // B's request leaves a prefill worker at decode's Ack for its prompt, right after its one plan.
    expect(run({ role: 'prefill' })).toEqual([32, ...Array.from({ length: 16 }, () => 8), 32]);
    expect(run({ role: 'prefill', faults: new FaultSet(['unbounded-shared-steps']) })).toEqual([
      32,
      29,
      ...Array.from({ length: 16 }, () => 32),
    ]);
  });

  it('on a prefill worker with short steps, stays shared for a second of steps after B left, not 16 plans (fault plan-count-shared-window: 16 plans)', () => {
    // Steps of 10 ms: B's request leaves with its prompt after the first shared plan; the window
    // closes 100 plans (1000 ms of steps, counted once B has gone: B's decode elsewhere and its client's turn) after it.
    // With the plan count alone it closed 16 plans after, and on bench:fair --target up B's next
    // request found a whole 256-token chunk in flight.
    const o = { role: 'prefill' as const, stepMs: 10 };
    expect(run(o, 102)).toEqual([32, ...Array.from({ length: 101 }, () => 8), 32]);
    // (A's 900 tokens are all computed 40 plans in: the first 20 plans are compared.)
    expect(run({ ...o, faults: new FaultSet(['plan-count-shared-window']) }, 102).slice(0, 20)).toEqual([
      32,
      ...Array.from({ length: 16 }, () => 8),
      ...Array.from({ length: 3 }, () => 32),
    ]);
  });

  it('StepBudget budgets such a step as if one decode ran in it', () => {
    const budget = new StepBudget({ maxStepMs: 30 });
    for (const n of [1, 101, 51, 1, 101]) budget.observe(n, 5 + 0.6 * n, n === 1 ? 1 : 0);
    // ms = 5 + 0.6 tokens: 30 ms leave 24.4 ms beside the one decode, 40 tokens.
    expect(budget.maxSharedChunk({ numTokens: 0, numPairs: 0, numDecodes: 0, numDecodePairs: 0 }, 0)).toBe(40);
    expect(budget.maxChunk({ numTokens: 0, numPairs: 0, numDecodes: 0, numDecodePairs: 0 }, 0)).toBe(Infinity);
  });
});

describe("the step that gives another tenant's short prompt its first token", () => {
  // A step budget of 48 prefill tokens beside decodes, short prompts up to 32 tokens.
  const limit: PrefillLimit = { ...tokenCap(() => 48), shortPromptTokens: 32 };

  /** A decodes a1 and prefills a2's 200 tokens; `who`'s 24-token chat arrives: the next two plans. */
  const run = (o: HarnessOptions, who = 'B'): string[][] => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 64, numPages: 80, contextLength: 256, cache: false, ...o });
    h.admit('a1', 'A', range(100, 4), 30);
    h.step(limit);
    h.admit('a2', 'A', range(200, 200), 2);
    expect(brief(h.step(limit).plan.items)).toEqual(['a1@4+1!', 'a2@0+48']);
    h.admit('b', who, range(500, 24), 2);
    return [brief(h.step(limit).plan.items), brief(h.step(limit).plan.items)];
  };

  it("holds another tenant's long chunk to the short-prompt bound, then gives it the budget again (fault crowded-first-token-step: the budget)", () => {
    expect(run({})).toEqual([
      ['a1@5+1!', 'a2@48+8', 'b@0+24!'],
      ['a1@6+1!', 'a2@56+48', 'b@24+1!'],
    ]);
    expect(run({ faults: new FaultSet(['crowded-first-token-step']) })).toEqual([
      ['a1@5+1!', 'a2@48+24', 'b@0+24!'],
      ['a1@6+1!', 'a2@72+48', 'b@24+1!'],
    ]);
  });

  it("leaves a tenant's own requests to its order and the budget", () => {
    expect(run({}, 'A')[0]).toEqual(['a1@5+1!', 'a2@48+48']);
  });
});

describe('every step while tenants share the node (held to the shared budget, a lone tenant never)', () => {
  // The usual budget: 16 prefill tokens beside decodes; the shared one 8 (loose: the usual one).
  const limit: PrefillLimit = {
    ...tokenCap(() => 16),
    maxSharedChunk: (s, _startPos, loose) => (loose === true ? 16 : 8) - (s.numTokens - s.numDecodes),
  };

  /**
   * A decodes a1 and prefills a2's 600 tokens for 30 plans; with `withB`, B's 2-token chat (6
   * tokens out) arrives before the 4th and ends in the 9th: the size of a2's chunk in each plan.
   */
  const run = (o: HarnessOptions, withB: boolean): number[] => {
    const h = new SchedulerHarness({
      chunkedPrefillSize: 64,
      numPages: 300,
      contextLength: 1024,
      cache: false,
      stepMs: 100, // the window's second of steps passes within its 16 plans
      ...o,
    });
    h.admit('a1', 'A', range(100, 4), 40);
    h.step(limit);
    h.admit('a2', 'A', range(200, 600), 2);
    const sizes: number[] = [];
    for (let i = 0; i < 30; i++) {
      if (withB && i === 3) h.admit('b', 'B', range(900, 2), 6);
      sizes.push(h.step(limit).plan.items.find((x) => x.rid === ('a2' as RequestId))?.tokens.length ?? 0);
    }
    if (withB) expect(h.ended.get('b' as RequestId)?.kind).toBe('finished');
    return sizes;
  };
  const times = (n: number, size: number): number[] => Array.from({ length: n }, () => size);

  it('shrinks while another tenant has a request here and for 16 plans after, then returns to the full budget (fault loose-shared-budget: full)', () => {
    // B's request is here for plans 4-9 (its prefill rides in the 4th, beside 6 of A's tokens); the window holds to the 24th.
    expect(run({}, true)).toEqual([...times(3, 16), 6, ...times(20, 8), ...times(6, 16)]);
    expect(run({ faults: new FaultSet(['loose-shared-budget']) }, true)).toEqual([
      ...times(3, 16),
      14,
      ...times(26, 16),
    ]);
  });

  it("leaves a lone tenant's steps as they were", () => {
    expect(run({}, false)).toEqual(times(30, 16));
    expect(run({ faults: new FaultSet(['loose-shared-budget']) }, false)).toEqual(times(30, 16));
  });

  it("StepBudget: 1.5x the decodes' time while shared, at least 10 ms, where a lone tenant gets 2x, at least 20 ms", () => {
    const budget = new StepBudget({ minPrefillTokens: 4 });
    for (const n of [1, 101, 51, 1, 101]) budget.observe(n, 5 + 0.6 * n, n === 1 ? 1 : 0);
    const step = (numDecodes: number): StepShape => ({
      numTokens: numDecodes,
      numPairs: 0,
      numDecodes,
      numDecodePairs: 0,
    });
    // ms = 5 + 0.6 tokens. Beside 2 decodes (6.2 ms): 20 ms alone (23 tokens), 10 ms shared (6 tokens).
    expect([budget.budgetMs(2), budget.budgetMs(2, 0, true)]).toEqual([20, 10]);
    expect([budget.maxChunk(step(2), 0), budget.maxSharedChunk(step(2), 0)]).toEqual([23, 6]);
    // Beside 20 decodes (17 ms): 34 ms alone (28 tokens), 25.5 ms shared (14 tokens).
    expect([budget.maxChunk(step(20), 0), budget.maxSharedChunk(step(20), 0)]).toEqual([28, 14]);
    // Loose: the usual budget, beside decodes and without (as if one decode ran: 20 - 5.6 ms, 24 tokens; shared 7).
    expect(budget.maxSharedChunk(step(20), 0, true)).toBe(28);
    expect([budget.maxSharedChunk(step(0), 0), budget.maxSharedChunk(step(0), 0, true)]).toEqual([7, 24]);
    // A fixed --max-step-ms is the operator's: shared steps keep it.
    const fixed = new StepBudget({ maxStepMs: 30 });
    expect(fixed.budgetMs(2, 0, true)).toBe(30);
    expect(() => new StepBudget({ sharedFactor: 0.5 })).toThrow(RangeError);
    expect(() => new StepBudget({ minSharedMs: 0 })).toThrow(RangeError);
  });
});
