import { describe, expect, it } from 'vitest';
import { WaitQueue } from './wait-queue.js';

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
});
