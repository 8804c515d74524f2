import { describe, expect, it } from 'vitest';
import { asRequestId } from '../core/index.js';
import { Tombstones } from './tombstones.js';

const rid = asRequestId;
const TTL = 600_000;

describe('tombstones', () => {
  it('forgets each tombstone once its time has come, in the order they were set', () => {
    const t = new Tombstones<{ state: string; expiresAtMs: number }>();
    t.set(rid('a'), { state: 'x', expiresAtMs: 10 });
    t.set(rid('b'), { state: 'y', expiresAtMs: 20 });
    expect(t.sweep(9)).toBe(0);
    expect([t.has(rid('a')), t.has(rid('b'))]).toEqual([true, true]);
    expect(t.sweep(10)).toBe(1);
    expect([t.has(rid('a')), t.get(rid('b'))?.state]).toEqual([false, 'y']);
    expect(t.sweep(25)).toBe(1);
    expect(t.size).toBe(0);
  });

  it('a tombstone set again lives until its new time; the old queue entry is skipped', () => {
    const t = new Tombstones<{ state: string; expiresAtMs: number }>();
    t.set(rid('a'), { state: 'first', expiresAtMs: 10 });
    t.set(rid('a'), { state: 'again', expiresAtMs: 30 });
    expect(t.sweep(15)).toBe(0);
    expect(t.get(rid('a'))?.state).toBe('again');
    expect(t.sweep(30)).toBe(1);
    expect(t.has(rid('a'))).toBe(false);
  });

  it('an input costs the same however many requests ended recently: one look when nothing expired', () => {
    for (const numEnded of [10, 10_000]) {
      const t = new Tombstones<{ expiresAtMs: number }>();
      for (let i = 0; i < numEnded; i++) t.set(rid(`r${i}`), { expiresAtMs: i + TTL });
      const before = t.numExamined;
      for (let input = 0; input < 1000; input++) t.sweep(input % 5); // 1000 inputs, nothing expires yet
      expect(t.numExamined - before).toBe(1000);
    }
  });

  it('sweeping everything costs one look per tombstone in all, and the queue does not keep the swept ones', () => {
    const t = new Tombstones<{ expiresAtMs: number }>();
    for (let i = 0; i < 5000; i++) {
      t.set(rid(`r${i}`), { expiresAtMs: i + TTL });
      t.sweep(i); // the machines sweep on every input
    }
    for (let now = TTL; now < TTL + 4999; now++) t.sweep(now); // every one but the last expired
    expect(t.size).toBe(1);
    expect(t.numExamined).toBeLessThanOrEqual(5000 + 5000 + 5000);
    expect(t.queueLength).toBe(1);
  });
});
