// The tokenizer queue's order, without threads: shortest first, a job overtaken MAX_PASSES times
// next, the reserved thread only short jobs, every job out exactly once; `fifo` (the fault
// point's queue) is arrival order.
import { describe, expect, it } from 'vitest';
import { MAX_PASSES, RESERVED_MAX_CHARS, TokenizerQueue, type Queued } from './tokenizer-queue.js';

let seq = 0;
const job = (numChars: number): Queued & { name: string } => ({ seq: seq++, numChars, name: `${numChars}` });

describe('the tokenizer queue', () => {
  it('hands the shortest job first, so a 17K prompt does not wait behind 4 MB ones', () => {
    const q = new TokenizerQueue<ReturnType<typeof job>>();
    for (const n of [4e6, 4e6, 4e6, 17_000]) q.add(job(n));
    expect(q.take(false)?.numChars).toBe(17_000);
    expect(q.length).toBe(3);
    expect(q.numChars).toBe(12e6);
  });

  it('gives the reserved thread only jobs under RESERVED_MAX_CHARS', () => {
    const q = new TokenizerQueue<ReturnType<typeof job>>();
    q.add(job(RESERVED_MAX_CHARS));
    expect(q.take(true)).toBeUndefined();
    q.add(job(RESERVED_MAX_CHARS - 1));
    expect(q.take(true)?.numChars).toBe(RESERVED_MAX_CHARS - 1);
    expect(q.take(true)).toBeUndefined();
    expect(q.take(false)?.numChars).toBe(RESERVED_MAX_CHARS);
  });

  it('takes a long job next once MAX_PASSES shorter ones overtook it: a stream of short jobs cannot starve it', () => {
    const q = new TokenizerQueue<ReturnType<typeof job>>();
    const long = job(1e6);
    q.add(long);
    const taken: number[] = [];
    for (let i = 0; i <= MAX_PASSES; i++) {
      q.add(job(10));
      taken.push((q.take(false) as Queued).numChars);
    }
    expect(taken.slice(0, MAX_PASSES)).toEqual(Array(MAX_PASSES).fill(10));
    expect(taken[MAX_PASSES]).toBe(1e6);
    expect(q.length).toBe(1);
  });

  it('lets each job out exactly once: taken, removed or drained', () => {
    const q = new TokenizerQueue<ReturnType<typeof job>>();
    const [a, b, c] = [job(3), job(2), job(1)];
    for (const j of [a, b, c]) q.add(j);
    expect(q.remove(b)).toBe(true);
    expect(q.remove(b)).toBe(false);
    expect(q.ahead(a)).toEqual({ numJobs: 1, numChars: 1 });
    expect(q.take(false)).toBe(c);
    expect(q.drain()).toEqual([a]);
    expect([q.length, q.numChars]).toEqual([0, 0]);
  });

  it('(fifo) keeps arrival order, as the fault point`s queue does', () => {
    const q = new TokenizerQueue<ReturnType<typeof job>>({ fifo: true });
    for (const n of [4e6, 17_000]) q.add(job(n));
    expect(q.take(false)?.numChars).toBe(4e6);
  });
});
