// PreauthRoom: whom the caps close (per source first, then the node; the oldest silent ones
// before the oldest that said Hello), and that a connection that left the room is never chosen.
import { describe, expect, it } from 'vitest';
import { PreauthRoom } from './preauth-room.js';

function room(greeted: readonly string[] = []): PreauthRoom<string> {
  return new PreauthRoom<string>((c) => greeted.includes(c));
}

describe('PreauthRoom', () => {
  it('closes a source over its cap from its own oldest, then the node over its cap from the oldest left', () => {
    const r = room();
    for (const [c, source] of [
      ['a1', 'A'],
      ['b1', 'B'],
      ['a2', 'A'],
      ['a3', 'A'],
      ['b2', 'B'],
    ] as const)
      r.enter(c, source);
    expect(r.over({ total: 10, perSource: 2 })).toEqual([{ c: 'a1', kind: 'source-cap' }]);
    expect(r.over({ total: 3, perSource: 2 })).toEqual([
      { c: 'a1', kind: 'source-cap' },
      { c: 'b1', kind: 'node-cap' },
    ]);
  });

  it('closes the oldest silent connection before an older one that said Hello', () => {
    const r = room(['peer']);
    r.enter('peer', 'A');
    r.enter('s1', 'A');
    r.enter('s2', 'A');
    expect(r.over({ total: 10, perSource: 1 })).toEqual([
      { c: 's1', kind: 'source-cap' },
      { c: 's2', kind: 'source-cap' },
    ]);
  });

  it('never chooses a connection that left the room (authenticated or closed)', () => {
    const r = room();
    r.enter('peer', 'A');
    r.enter('s1', 'A');
    r.enter('s2', 'A');
    expect(r.leave('peer')).toBe(true);
    expect(r.leave('peer')).toBe(false);
    expect([r.size, r.fromSource('A')]).toEqual([2, 2]);
    expect(r.over({ total: 1, perSource: 1 })).toEqual([{ c: 's1', kind: 'source-cap' }]);
  });
});
