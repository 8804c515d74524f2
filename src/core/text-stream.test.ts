// Stop strings over streamed text: what is sent, what is held back, where a match cuts.
import { describe, expect, it } from 'vitest';
import { TextStream, type Detokenizer } from './text-stream.js';

/** A detokenizer whose token i reads as pieces[i]. */
function pieces(list: readonly string[]): Detokenizer {
  return { push: (id) => list[id] ?? '', flush: () => '' };
}

function run(
  list: readonly string[],
  stops: readonly string[],
): { sent: string[]; stoppedAt: number | null; end: string } {
  const stream = new TextStream(pieces(list), stops);
  const sent: string[] = [];
  for (let i = 0; i < list.length; i++) {
    const step = stream.push(i);
    sent.push(step.text);
    if (step.kind === 'stop') return { sent, stoppedAt: i, end: '' };
  }
  return { sent, stoppedAt: null, end: stream.flush().text };
}

describe('TextStream', () => {
  it('sends text at once when nothing could start a stop string', () => {
    expect(run(['Hel', 'lo', ' world'], ['xyz'])).toEqual({ sent: ['Hel', 'lo', ' world'], stoppedAt: null, end: '' });
  });

  it('holds back a tail that could start a stop string, and cuts at the match', () => {
    expect(run(['Hello', ' wo', 'rld', '!'], ['world'])).toEqual({ sent: ['Hello', ' ', ''], stoppedAt: 2, end: '' });
  });

  it('releases a held tail once it can no longer become a stop string', () => {
    expect(run(['ab', 'c', 'x'], ['abd'])).toEqual({ sent: ['', 'abc', 'x'], stoppedAt: null, end: '' });
  });

  it('sends a held tail at the end of the stream', () => {
    expect(run(['one', ' tw'], [' two'])).toEqual({ sent: ['one', ''], stoppedAt: null, end: ' tw' });
  });

  it('cuts at the earliest match of several stop strings', () => {
    expect(run(['a-b', '=c'], ['=', '-'])).toEqual({ sent: ['a'], stoppedAt: 0, end: '' });
    expect(run(['xx', 'END', 'yy'], ['yy', 'END'])).toEqual({ sent: ['xx', ''], stoppedAt: 1, end: '' });
  });

  it('finds a stop string inside one token and withholds everything after it', () => {
    expect(run(['say STOP now'], ['STOP'])).toEqual({ sent: ['say '], stoppedAt: 0, end: '' });
  });

  it('adds nothing once stopped', () => {
    const stream = new TextStream(pieces(['a.', 'b']), ['.']);
    expect(stream.push(0)).toEqual({ kind: 'stop', text: 'a' });
    expect(stream.push(1)).toEqual({ kind: 'text', text: '' });
    expect(stream.flush()).toEqual({ kind: 'text', text: '' });
    expect(stream.stopped).toBe(true);
  });
});
