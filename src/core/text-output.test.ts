// TextOutput: the one place a back end turns ids into `tokens` events and ends a request's stream.
import { describe, expect, it } from 'vitest';
import { AbortedError } from './errors/index.js';
import { EventChannel } from './event-channel.js';
import type { GenerateEvent } from './generate.js';
import { TextOutput } from './text-output.js';
import { TextStream } from './text-stream.js';

const letters = (stops: readonly string[]) =>
  new TextStream({ push: (id) => String.fromCharCode(97 + id), flush: () => '' }, stops);
const usage = { promptTokens: 3, completionTokens: 2, cachedTokens: 0 };
const lp = (id: number) => ({ logprob: -id, top: [] });

function output(stops: readonly string[]): { out: TextOutput; events: () => Promise<GenerateEvent[]> } {
  const channel = new EventChannel(() => undefined);
  const out = new TextOutput(channel, letters(stops));
  return {
    out,
    events: async () => {
      const all: GenerateEvent[] = [];
      for await (const e of channel) all.push(e);
      return all;
    },
  };
}

describe('TextOutput', () => {
  it('holds back a possible stop-string start and sends it with the last ids, then finishes', async () => {
    const { out, events } = output(['cx']);
    expect(out.tokens([0, 1, 2], [], false)).toBe('more'); // "abc": "c" could start "cx"
    expect(out.tokens([3], [], true)).toBe('more'); // "cd": no match; held text goes out with the last id
    out.finished('length', usage);
    expect(await events()).toEqual([
      { type: 'tokens', ids: [0, 1, 2], text: 'ab' },
      { type: 'tokens', ids: [3], text: 'cd' },
      { type: 'finished', finishReason: 'length', usage },
    ]);
  });

  it('cuts at a stop string: ids up to the match, their log-probabilities, no match text; the end says stop', async () => {
    const { out, events } = output(['c']);
    expect(out.tokens([0, 1, 2, 3], [lp(0), lp(1), lp(2), lp(3)], false)).toBe('stop');
    expect(out.numTokens).toBe(3);
    expect(out.tokens([4], [], false)).toBe('more'); // nothing after a stop
    out.finished('length', usage);
    expect(await events()).toEqual([
      { type: 'tokens', ids: [0, 1, 2], text: 'ab', logprobs: [lp(0), lp(1), lp(2)] },
      { type: 'finished', finishReason: 'stop', usage },
    ]);
  });

  it('sends only a failure after a failure', async () => {
    const { out, events } = output([]);
    out.failed(new AbortedError('gone'));
    out.tokens([1], [], true);
    out.finished('length', usage);
    expect(await events()).toEqual([{ type: 'failed', error: expect.objectContaining({ code: 'aborted' }) }]);
  });
});
