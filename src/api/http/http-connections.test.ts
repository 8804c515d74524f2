// ConnectionTable with a fake clock and byte counts: when a waiting connection is due (a fresh one
// at the headers bound byte or not, an idle one at the idle bound or at the headers bound after
// its first byte), that a busy one never is, and whom the caps choose (the longest waiting,
// overall or from one source).
import { describe, expect, it } from 'vitest';
import { ConnectionTable } from './http-connections.js';

const BOUNDS = { idleMs: 3_000, headersMs: 1_000 };

function table(): { t: ConnectionTable<string>; bytes: Map<string, number>; due: (nowMs: number) => string[] } {
  const t = new ConnectionTable<string>(BOUNDS);
  const bytes = new Map<string, number>();
  const due = (nowMs: number): string[] =>
    t.expired(nowMs, (c) => bytes.get(c) ?? 0).map(({ c, why }) => `${c} ${why}`);
  return { t, bytes, due };
}

describe('ConnectionTable', () => {
  it('closes a fresh connection at the headers bound whether or not a byte arrived', () => {
    const { t, bytes, due } = table();
    t.opened('silent', '10.0.0.1', 0);
    t.opened('trickle', '10.0.0.1', 0);
    bytes.set('trickle', 40);
    expect(due(999)).toEqual([]);
    bytes.set('trickle', 80);
    expect(due(1_000)).toEqual(['silent headers', 'trickle headers']);
  });

  it('never names a connection with a request in progress, however long it is silent', () => {
    const { t, due } = table();
    t.opened('stream', '10.0.0.1', 0);
    t.requestStarted('stream');
    expect(due(3_600_000)).toEqual([]);
    expect(t.oldestWaiting()).toBeUndefined();
  });

  it('closes an idle connection at the idle bound, or at the headers bound after the first byte of its next head', () => {
    const { t, bytes, due } = table();
    for (const c of ['quiet', 'slow']) {
      t.opened(c, '10.0.0.1', 0);
      bytes.set(c, 100);
      t.requestStarted(c);
      t.requestEnded(c, 500, 100);
    }
    expect(due(3_499)).toEqual([]);
    bytes.set('slow', 120); // its next head begins; seen at 3_000
    expect(due(3_000)).toEqual([]);
    expect(due(3_500)).toEqual(['quiet idle']);
    expect(due(4_000)).toEqual(['quiet idle', 'slow headers']);
  });

  it('offers the longest-waiting connection first, overall and per source; a connection that waits again goes to the back', () => {
    const { t } = table();
    t.opened('a', '10.0.0.1', 0);
    t.opened('b', '10.0.0.2', 1);
    t.opened('c', '10.0.0.1', 2);
    expect([t.oldestWaiting(), t.oldestWaiting('10.0.0.1'), t.waitingFrom('10.0.0.1')]).toEqual(['a', 'a', 2]);
    t.requestStarted('a');
    expect([t.oldestWaiting(), t.oldestWaiting('10.0.0.1'), t.waitingFrom('10.0.0.1')]).toEqual(['b', 'c', 1]);
    t.requestEnded('a', 10, 0);
    t.closed('b');
    expect([t.oldestWaiting(), t.size]).toEqual(['c', 2]);
  });
});
