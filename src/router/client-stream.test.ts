import { describe, expect, it } from 'vitest';
import { AbortedError, TextStream, type GenerateEvent } from '../core/index.js';
import { ClientStream } from './client-stream.js';

/** Token n reads as the n-th letter, through the real TextStream (stop strings held back and cut there). */
function letters(stops: readonly string[]): TextStream {
  return new TextStream({ push: (id) => String.fromCharCode(97 + id), flush: () => '' }, stops);
}

async function drain(stream: ClientStream): Promise<GenerateEvent[]> {
  const events: GenerateEvent[] = [];
  for await (const e of stream) events.push(e);
  return events;
}

describe('ClientStream', () => {
  it('streams text as token ids arrive and ends with usage', async () => {
    const s = new ClientStream(letters([]), 7, () => undefined);
    expect(s.tokens([0, 1])).toBe('more');
    s.tokens([2]);
    s.finished('length');
    expect(await drain(s)).toEqual([
      { type: 'tokens', ids: [0, 1], text: 'ab' },
      { type: 'tokens', ids: [2], text: 'c' },
      { type: 'finished', finishReason: 'length', usage: { promptTokens: 7, completionTokens: 3, cachedTokens: 0 } },
    ]);
  });

  it('ends at a stop string as finished (the caller aborts the rest), never sending the match', async () => {
    const s = new ClientStream(letters(['d']), 2, () => undefined);
    expect(s.tokens([0, 1, 2, 3, 4])).toBe('stop');
    s.tokens([5]);
    s.finished('length');
    expect(await drain(s)).toEqual([
      { type: 'tokens', ids: [0, 1, 2, 3], text: 'abc' },
      { type: 'finished', finishReason: 'stop', usage: { promptTokens: 2, completionTokens: 4, cachedTokens: 0 } },
    ]);
  });

  it('delivers nothing after a failure, and tells its owner when the reader leaves early', async () => {
    let returned = 0;
    const s = new ClientStream(letters([]), 1, () => returned++);
    s.tokens([0]);
    for await (const _ of s) break;
    expect(returned).toBe(1);
    const t = new ClientStream(letters([]), 1, () => returned++);
    t.failed(new AbortedError('gone'));
    t.tokens([1]);
    expect(await drain(t)).toEqual([{ type: 'failed', error: expect.objectContaining({ code: 'aborted' }) }]);
    expect(returned).toBe(1);
  });
});
