import { describe, expect, it } from 'vitest';
import { asRequestId, FaultSet, NO_FAULTS } from '../core/index.js';
import { SchedulerHarness } from '../../test/sim/scheduler-runner.js';
import type { Role } from './index.js';

const SKIP_ADMISSION = new FaultSet(['skip-admission']);
const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);

/** Nothing was ever allocated: every page free, no epoch handed out. */
function ledgerUntouched(h: SchedulerHarness): boolean {
  const counts = h.pool.ledger.counts();
  return counts.free === h.pool.ledger.numPages && h.pool.ledger.lastEpoch === 0;
}

describe('admission at the context length (L = 64, pool of 20 pages = 80 tokens)', () => {
  const at = (numTokens: number) => {
    const h = new SchedulerHarness({ contextLength: 64, numPages: 20 });
    const result = h.admit('r', 't', range(0, numTokens - 8), 8);
    return { h, result };
  };

  it('L - 1 and L are admitted and run to the end', () => {
    for (const n of [63, 64]) {
      const { h, result } = at(n);
      expect(result).toEqual({ kind: 'admitted' });
      h.runUntilDone();
      expect(h.ended.get(asRequestId('r'))).toMatchObject({
        kind: 'finished',
        finishReason: 'length',
        usage: { completionTokens: 8 },
      });
    }
  });

  it('L + 1 is refused with context_length_exceeded, giving both numbers, and the ledger shows no allocation', () => {
    const { h, result } = at(65);
    expect(result.kind).toBe('rejected');
    if (result.kind !== 'rejected') return;
    expect(result.error.code).toBe('context_length_exceeded');
    expect(result.error.message).toMatch(
      /maximum context length is 64 tokens\. However, you requested 65 tokens \(57 in the messages, 8 in the completion\)/,
    );
    h.step();
    expect(ledgerUntouched(h)).toBe(true);
    expect(h.scheduler.numWaiting).toBe(0);
  });
});

describe('admission at the pool (11 pages of 4 = 44 tokens, context 64: a misconfigured node)', () => {
  const at = (role: Role, numPromptTokens: number, maxTokens: number) => {
    const h = new SchedulerHarness({ role, contextLength: 64, numPages: 11 });
    return { h, result: h.admit('r', 't', range(0, numPromptTokens), maxTokens) };
  };

  it('L - 1 and L are admitted; the request at L runs to the end using every page', () => {
    expect(at('colocated', 39, 4).result.kind).toBe('admitted');
    const { h, result } = at('colocated', 40, 4);
    expect(result.kind).toBe('admitted');
    h.runUntilDone();
    expect(h.ended.get(asRequestId('r'))).toMatchObject({ kind: 'finished', usage: { completionTokens: 4 } });
  });

  it('L + 1 is refused with pool_too_small, giving both numbers, and the ledger shows no allocation', () => {
    const { h, result } = at('colocated', 41, 4);
    expect(result).toMatchObject({ kind: 'rejected', error: { code: 'pool_too_small' } });
    if (result.kind !== 'rejected') return;
    expect(result.error.message).toMatch(
      /pool holds 44 tokens \(11 pages of 4\), but this request needs 45 tokens \(12 pages\) for 41 prompt tokens \+ 4 completion tokens/,
    );
    h.step();
    expect(ledgerUntouched(h)).toBe(true);
  });

  it('a prefill node needs room for the prompt only: L - 1, L admitted, L + 1 refused', () => {
    expect(at('prefill', 43, 20).result.kind).toBe('admitted');
    expect(at('prefill', 44, 20).result.kind).toBe('admitted');
    const { h, result } = at('prefill', 45, 19);
    expect(result).toMatchObject({ kind: 'rejected', error: { code: 'pool_too_small' } });
    expect(ledgerUntouched(h)).toBe(true);
  });
});

describe('negative control: the fault skip-admission', () => {
  /** A request that can never finish on this node is refused before any page is allocated. */
  function refusedBeforeAllocating(faults: FaultSet, numPromptTokens: number, maxTokens: number): boolean {
    const h = new SchedulerHarness({ contextLength: 64, numPages: 11, faults });
    const result = h.admit('r', 't', range(0, numPromptTokens), maxTokens);
    let everAllocated = false;
    for (let i = 0; i < 100 && h.scheduler.numRunning + h.scheduler.numWaiting > 0; i++) {
      h.step();
      everAllocated ||= h.pool.ledger.lastEpoch > 0;
    }
    return result.kind === 'rejected' && !everAllocated && ledgerUntouched(h);
  }

  it('is refused with admission on, and with it off the ledger allocates pages for a request that can never finish', () => {
    expect(refusedBeforeAllocating(NO_FAULTS, 40, 10)).toBe(true);
    expect(refusedBeforeAllocating(SKIP_ADMISSION, 40, 10)).toBe(false);
    expect(refusedBeforeAllocating(NO_FAULTS, 60, 10)).toBe(true);
    expect(refusedBeforeAllocating(SKIP_ADMISSION, 60, 10)).toBe(false);
  });

  it('without admission, the scheduler still ends such a request with an error rather than loop (after allocating: too late)', () => {
    const pool = new SchedulerHarness({ contextLength: 64, numPages: 11, faults: SKIP_ADMISSION });
    expect(pool.admit('p', 't', range(0, 40), 10).kind).toBe('admitted');
    pool.runUntilDone(100);
    expect(pool.ended.get(asRequestId('p'))).toMatchObject({ kind: 'failed', error: { code: 'pool_too_small' } });
    expect(pool.pool.ledger.lastEpoch).toBeGreaterThan(0);

    const context = new SchedulerHarness({ contextLength: 64, numPages: 40, faults: SKIP_ADMISSION });
    expect(context.admit('c', 't', range(0, 60), 10).kind).toBe('admitted');
    context.runUntilDone(100);
    expect(context.ended.get(asRequestId('c'))).toMatchObject({
      kind: 'failed',
      error: { code: 'context_length_exceeded' },
    });
    for (const h of [pool, context]) expect(h.pool.ledger.counts()).toMatchObject({ allocated: 0, quarantined: 0 });
  });
});
