// The trace files of several processes merge into one trace in causal order: each process's own
// order is kept, and a message's recv comes after its send even when the receiver's clock runs
// behind the sender's (the processes' clocks differ by more than a loopback hop takes).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TraceEvent } from '../../../src/transfer/index.js';
import { readTraces } from './support.js';

const send = (node: string, peer: string, rid: string): TraceEvent => ({
  kind: 'send',
  node,
  role: 'router',
  rid,
  message: 'Reserve',
  peer,
});
const recv = (node: string, peer: string, rid: string): TraceEvent => ({
  kind: 'recv',
  node,
  role: 'decode',
  rid,
  message: 'Reserve',
  peer,
});
const state = (node: string, rid: string): TraceEvent => ({
  kind: 'state',
  node,
  role: 'decode',
  rid,
  from: 'Idle',
  to: 'AwaitingKv',
});

async function merged(files: Record<string, { t: number; e: TraceEvent }[]>): Promise<TraceEvent[]> {
  const dir = await mkdtemp(join(tmpdir(), 'tessera-traces-'));
  try {
    for (const [name, lines] of Object.entries(files))
      await writeFile(join(dir, `${name}.jsonl`), lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    return (await readTraces(dir)).events;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('readTraces', () => {
  it("puts a recv stamped before its send (a receiver clock behind) after the send, keeping each file's order", async () => {
    const events = await merged({
      router: [{ t: 100.5, e: send('r', 'd', 'q1') }],
      decode: [
        { t: 100.2, e: recv('d', 'r', 'q1') },
        { t: 100.3, e: state('d', 'q1') },
      ],
    });
    expect(events).toEqual([send('r', 'd', 'q1'), recv('d', 'r', 'q1'), state('d', 'q1')]);
  });

  it('orders by time where causality does not decide, and counts repeated messages', async () => {
    const events = await merged({
      router: [
        { t: 1, e: send('r', 'd', 'q1') },
        { t: 5, e: send('r', 'd', 'q1') },
      ],
      decode: [
        { t: 2, e: recv('d', 'r', 'q1') },
        { t: 3, e: state('d', 'q2') },
        { t: 4, e: recv('d', 'r', 'q1') },
      ],
    });
    expect(events).toEqual([
      send('r', 'd', 'q1'),
      recv('d', 'r', 'q1'),
      state('d', 'q2'),
      send('r', 'd', 'q1'),
      recv('d', 'r', 'q1'),
    ]);
  });
});
