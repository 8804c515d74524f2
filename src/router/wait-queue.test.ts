import { describe, expect, it } from 'vitest';
import { asTenantId } from '../core/index.js';
import { WaitQueue, type WaitFairness } from './wait-queue.js';

interface Item {
  readonly id: string;
  readonly tenant: string;
  readonly numTokens: number;
}
const FAIR: WaitFairness<Item> = { tenantOf: (x) => asTenantId(x.tenant), tokensOf: (x) => x.numTokens };
/** A parks three 100-token prompts, then B two 10-token ones; the order they are taken in. */
const takeOrder = (fairness?: WaitFairness<Item>): string[] => {
  const q = new WaitQueue<Item>({ maxWaiting: 16, maxWaitMs: 1000 }, fairness);
  for (const id of ['a1', 'a2', 'a3']) q.park({ id, tenant: 'A', numTokens: 100 }, 0, 0, false);
  for (const id of ['b1', 'b2']) q.park({ id, tenant: 'B', numTokens: 10 }, 1, 1, false);
  const order: string[] = [];
  for (let w = q.take(); w !== undefined; w = q.take()) order.push(w.item.id);
  return order;
};

describe('WaitQueue', () => {
  it('serves in arrival order; a retried request keeps its place at the front', () => {
    const q = new WaitQueue<string>({ maxWaiting: 3, maxWaitMs: 1000 });
    expect([q.park('a', 0, 0, false), q.park('b', 5, 5, false), q.park('c', 6, 6, false)]).toEqual([true, true, true]);
    expect(q.park('d', 7, 7, false)).toBe(false); // full
    expect(q.take()?.item).toBe('a');
    expect(q.park('a', 0, 50, true)).toBe(true); // refused again: back to the front, its wait counted from 0
    expect([q.take()?.item, q.take()?.item, q.take()?.item, q.take()]).toEqual(['a', 'b', 'c', undefined]);
  });

  it('gives up on requests whose wait ran out, and refuses to park one already past it', () => {
    const q = new WaitQueue<string>({ maxWaiting: 8, maxWaitMs: 100 });
    q.park('a', 0, 0, false);
    q.park('b', 60, 60, false);
    expect(q.expired(99)).toEqual([]);
    expect(q.expired(100)).toEqual([{ item: 'a', sinceMs: 0 }]);
    expect(q.park('c', 0, 100, true)).toBe(false);
    expect(q.remove((x) => x === 'b')).toEqual([{ item: 'b', sinceMs: 60 }]);
    expect(q.size).toBe(0);
  });

  it('with fairness, takes from the tenant served the fewest prompt tokens; FCFS within a tenant', () => {
    // Both at 0: the fewer tokens first (b1: B 10), then A (a1: 100), then B (10 < 100), then A's rest.
    expect(takeOrder(FAIR)).toEqual(['b1', 'a1', 'b2', 'a2', 'a3']);
  });

  it('without fairness (the fault no-tenant-fairness) takes in arrival order', () => {
    expect(takeOrder()).toEqual(['a1', 'a2', 'a3', 'b1', 'b2']);
  });

  it('a retried request goes back to the front of its tenant and gets its charge back; a tenant arriving late is lifted', () => {
    const q = new WaitQueue<Item>({ maxWaiting: 16, maxWaitMs: 1000 }, FAIR);
    q.park({ id: 'a1', tenant: 'A', numTokens: 50 }, 0, 0, false);
    q.park({ id: 'a2', tenant: 'A', numTokens: 50 }, 0, 0, false);
    const a1 = q.take();
    expect([a1?.item.id, q.counterOf(asTenantId('A'))]).toEqual(['a1', 50]);
    q.park(a1!.item, 0, 10, true);
    expect(q.counterOf(asTenantId('A'))).toBe(0);
    expect(q.take()?.item.id).toBe('a1');
    q.park({ id: 'b1', tenant: 'B', numTokens: 500 }, 20, 20, false); // lifted to A's 50: no credit for arriving late
    expect(q.counterOf(asTenantId('B'))).toBe(50);
    expect(q.expired(1000).map((w) => w.item.id)).toEqual(['a2']);
    expect(q.remove((x) => x.id === 'b1').map((w) => w.item.id)).toEqual(['b1']);
    expect([q.size, q.take()]).toEqual([0, undefined]);
  });
});
