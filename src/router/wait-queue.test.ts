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
  for (const [i, id] of ['a1', 'a2', 'a3'].entries()) q.park({ id, tenant: 'A', numTokens: 100 }, i, 0, 0, false);
  for (const [i, id] of ['b1', 'b2'].entries()) q.park({ id, tenant: 'B', numTokens: 10 }, 3 + i, 1, 1, false);
  const order: string[] = [];
  for (let w = q.take(); w !== undefined; w = q.take()) order.push(w.item.id);
  return order;
};

describe('WaitQueue', () => {
  it('serves in arrival order; a retried request keeps its place at the front', () => {
    const q = new WaitQueue<string>({ maxWaiting: 3, maxWaitMs: 1000 });
    expect([q.park('a', 0, 0, 0, false), q.park('b', 1, 5, 5, false), q.park('c', 2, 6, 6, false)]).toEqual([
      true,
      true,
      true,
    ]);
    expect(q.park('d', 3, 7, 7, false)).toBe(false); // full
    expect(q.take()?.item).toBe('a');
    expect(q.park('a', 0, 0, 50, true)).toBe(true); // refused again: back to the front, its wait counted from 0
    expect([q.take()?.item, q.take()?.item, q.take()?.item, q.take()]).toEqual(['a', 'b', 'c', undefined]);
  });

  it('requests of a burst refused in any order wait in arrival order', () => {
    // The queue was empty, so a burst's requests were all tried at once; their refusals come back in any order.
    const q = new WaitQueue<string>({ maxWaiting: 8, maxWaitMs: 1000 });
    for (const [arrival, item] of [
      [3, 'd'],
      [1, 'b'],
      [2, 'c'],
    ] as const)
      q.park(item, arrival, 0, 0, false);
    q.park('e', 4, 1, 1, false);
    const taken = q.take();
    q.park('b', 1, 0, 2, true); // tried again and refused: before c, d and e
    q.park('a', 0, 3, 3, false); // refused late (its attempt was slow): still the first
    expect(taken?.item).toBe('b');
    expect([q.take(), q.take(), q.take(), q.take(), q.take()].map((w) => w?.item)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('with fairness, a request refused on its first try gets no refund of a charge it never paid', () => {
    const q = new WaitQueue<Item>({ maxWaiting: 16, maxWaitMs: 1000 }, FAIR);
    q.park({ id: 'a0', tenant: 'A', numTokens: 10 }, 0, 0, 0, false);
    for (const [i, id] of ['a2', 'a1'].entries()) q.park({ id, tenant: 'A', numTokens: 200 }, 2 - i, 0, 0, false);
    expect(q.counterOf(asTenantId('A'))).toBe(0);
    expect(q.take()?.item.id).toBe('a0');
    expect(q.counterOf(asTenantId('A'))).toBe(10);
    // B arrives lifted to A's 10 (not to a credit A got from its own refusals); its 16 tokens go before A's 200.
    q.park({ id: 'b1', tenant: 'B', numTokens: 16 }, 3, 1, 1, false);
    expect(q.counterOf(asTenantId('B'))).toBe(10);
    expect([q.take(), q.take(), q.take()].map((w) => w?.item.id)).toEqual(['b1', 'a1', 'a2']);
  });

  it('gives up on requests whose wait ran out, and refuses to park one already past it', () => {
    const q = new WaitQueue<string>({ maxWaiting: 8, maxWaitMs: 100 });
    q.park('a', 0, 0, 0, false);
    q.park('b', 1, 60, 60, false);
    expect(q.expired(99)).toEqual([]);
    expect(q.expired(100)).toEqual([{ item: 'a', sinceMs: 0 }]);
    expect(q.park('c', 2, 0, 100, true)).toBe(false);
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
    q.park({ id: 'a1', tenant: 'A', numTokens: 50 }, 0, 0, 0, false);
    q.park({ id: 'a2', tenant: 'A', numTokens: 50 }, 1, 0, 0, false);
    const a1 = q.take();
    expect([a1?.item.id, q.counterOf(asTenantId('A'))]).toEqual(['a1', 50]);
    q.park(a1!.item, 0, 0, 10, true);
    expect(q.counterOf(asTenantId('A'))).toBe(0);
    expect(q.take()?.item.id).toBe('a1');
    q.park({ id: 'b1', tenant: 'B', numTokens: 500 }, 2, 20, 20, false); // lifted to A's 50: no credit for arriving late
    expect(q.counterOf(asTenantId('B'))).toBe(50);
    expect(q.expired(1000).map((w) => w.item.id)).toEqual(['a2']);
    expect(q.remove((x) => x.id === 'b1').map((w) => w.item.id)).toEqual(['b1']);
    expect([q.size, q.take()]).toEqual([0, undefined]);
  });
});
