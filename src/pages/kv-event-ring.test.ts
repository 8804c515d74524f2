// KvEventRing: sequence numbers from 1, a bounded ring (the oldest go first), a reset for a reader
// whose cursor fell out of the ring or comes from another run, reads bounded by `max`, and
// listeners told of every publish.
import { describe, expect, it } from 'vitest';
import { KvEventRing, type KvEvent } from './kv-events.js';
import { PrefixHasher } from './prefix-hash.js';

const hasher = new PrefixHasher('cluster-secret');
const stored = (n: number): KvEvent => ({
  type: 'BlockStored',
  tenant: 't',
  blockHash: `h${n}`,
  parentHash: null,
  adapterDigest: null,
});
const seqs = (ring: KvEventRing, after: number, max = 100): number[] => ring.read(after, max).records.map((r) => r.seq);

function ringWith(capacity: number, numEvents: number): KvEventRing {
  const ring = new KvEventRing(hasher, capacity, () => 1_000);
  for (let i = 1; i <= numEvents; i++) ring.publish(stored(i));
  return ring;
}

describe('KvEventRing', () => {
  it('numbers events from 1 and reads those after a cursor, in order', () => {
    const ring = ringWith(8, 5);
    expect(ring.lastSeq).toBe(5);
    expect(seqs(ring, 0)).toEqual([1, 2, 3, 4, 5]);
    expect(seqs(ring, 3)).toEqual([4, 5]);
    expect(ring.read(3, 100)).toMatchObject({ reset: false, next: 5 });
    expect(ring.read(5, 100)).toEqual({ reset: false, records: [], next: 5 });
    expect(ring.read(2, 100).records[0]).toEqual({ seq: 3, atMs: 1_000, event: stored(3) });
  });

  it('reads at most max events; the next read goes on from there', () => {
    const ring = ringWith(8, 7);
    const first = ring.read(0, 3);
    expect(first.records.map((r) => r.seq)).toEqual([1, 2, 3]);
    expect(first.next).toBe(3);
    expect(seqs(ring, first.next, 3)).toEqual([4, 5, 6]);
  });

  it('keeps only the last `capacity` events', () => {
    const ring = ringWith(4, 10);
    expect(ring.oldestSeq).toBe(7);
    expect(seqs(ring, 0)).toEqual([7, 8, 9, 10]);
  });

  it('resets a reader that fell behind the ring: it gets what is held, from the oldest', () => {
    const ring = ringWith(4, 10);
    expect(ring.read(5, 100)).toMatchObject({ reset: true, next: 10 });
    expect(seqs(ring, 5)).toEqual([7, 8, 9, 10]);
    // Exactly at the edge (the next event it needs is the oldest held): no gap, no reset.
    expect(ring.read(6, 100).reset).toBe(false);
    expect(seqs(ring, 6)).toEqual([7, 8, 9, 10]);
  });

  it('resets a reader whose cursor is past the last event (it read another run of the node)', () => {
    const ring = ringWith(4, 2);
    expect(ring.read(50, 100)).toMatchObject({ reset: true, next: 2 });
    expect(seqs(ring, 50)).toEqual([1, 2]);
    expect(new KvEventRing(hasher, 4).read(3, 10)).toEqual({ reset: true, records: [], next: 0 });
  });

  it('does not reset a new reader (cursor 0), however much the ring dropped', () => {
    expect(ringWith(4, 100).read(0, 100)).toMatchObject({ reset: false, next: 100 });
  });

  it('tells each listener of each publish until it unsubscribes', () => {
    const ring = new KvEventRing(hasher, 4);
    let told = 0;
    const stop = ring.subscribe(() => told++);
    ring.publish(stored(1));
    ring.publish(stored(2));
    stop();
    ring.publish(stored(3));
    expect(told).toBe(2);
  });

  it('refuses a capacity of 0 and a negative cursor', () => {
    expect(() => new KvEventRing(hasher, 0)).toThrow();
    expect(() => ringWith(4, 1).read(-1, 10)).toThrow();
  });
});
