// Telemetry is not control: the router's load (attempts per worker, by state) and its transfer
// timing come from the machine's own counts and effects, never from its trace. The same script of
// inputs is driven through a machine that traces nothing and one that records every event; load,
// attempts and effects must be equal at every step, and equal to what the script implies.
import { describe, expect, it } from 'vitest';
import { asEpoch, asPageId, asRequestId, asTenantId, samplingParams } from '../core/index.js';
import type { Message } from './messages.js';
import { RouterMachine, type ClientRequest, type RouterEffect, type RouterInput } from './router-machine.js';
import { NO_TRACE, type TraceEvent, type TraceSink } from './trace.js';

const rid = asRequestId('r1');
const request: ClientRequest = {
  rid,
  tenant: asTenantId('t0'),
  tokens: [1, 2, 3],
  sampling: samplingParams({ maxTokens: 2 }),
};
const TAGS = [{ page: asPageId(0), epoch: asEpoch(1) }];
const PEERS = ['p0', 'p1', 'd0'] as const;

function machine(trace: TraceSink): RouterMachine {
  const prefills = ['p0', 'p1'];
  return new RouterMachine({
    node: 'router',
    contextLength: 64,
    trace,
    pickPair: (_req, avoid) => {
      const prefill = prefills.find((p) => !avoid.prefills.includes(p));
      return prefill === undefined ? undefined : { prefill, decode: 'd0' };
    },
  });
}

const received = (from: string, message: Message): RouterInput => ({ kind: 'received', from, message });

/** Submit, Reserved, p0 fails (retry on p1 as r1.2), Reserved again, tokens at t=25, Finished. */
const SCRIPT: readonly (readonly [number, RouterInput])[] = [
  [0, { kind: 'submit', request }],
  [1, received('d0', { type: 'Reserved', rid, tags: TAGS, pageSize: 4, dataAddress: 'd0' })],
  [5, received('p0', { type: 'Failed', rid, code: 'overloaded', message: 'busy' })],
  [6, received('d0', { type: 'Reserved', rid: asRequestId('r1.2'), tags: TAGS, pageSize: 4, dataAddress: 'd0' })],
  [25, received('d0', { type: 'Tokens', rid: asRequestId('r1.2'), offset: 0, ids: [7, 8], logprobs: [] })],
  [
    26,
    received('d0', {
      type: 'Finished',
      rid: asRequestId('r1.2'),
      finishReason: 'length',
      promptTokens: 3,
      completionTokens: 2,
    }),
  ],
];

interface Observed {
  readonly effects: readonly RouterEffect[];
  readonly inFlight: readonly number[];
  readonly attempts: Record<string, number>;
}

function run(trace: TraceSink): Observed[] {
  const m = machine(trace);
  return SCRIPT.map(([now, input]) => ({
    effects: m.handle(now, input),
    inFlight: PEERS.map((p) => m.inFlightOn(p)),
    attempts: m.attemptsByState(),
  }));
}

describe('RouterMachine load and timing come from the machine, not its trace', () => {
  it('is the same with a tracer that records nothing as with one that records everything', () => {
    const events: TraceEvent[] = [];
    const silent = run(NO_TRACE);
    const recorded = run({ emit: (e) => events.push(e) });
    expect(events.length).toBeGreaterThan(10); // the recording tracer really saw the run
    expect(silent).toEqual(recorded);
  });

  it('counts each live attempt on both workers of its pair, from Reserve to its end, and times the transfer', () => {
    const steps = run(NO_TRACE);
    // [p0, p1, d0] after each input
    expect(steps.map((s) => s.inFlight)).toEqual([
      [1, 0, 1],
      [1, 0, 1],
      [0, 1, 1],
      [0, 1, 1],
      [0, 1, 1],
      [0, 0, 0],
    ]);
    expect(steps.map((s) => s.attempts)).toEqual([
      { Reserving: 1 },
      { Prefilling: 1 },
      { Reserving: 1 },
      { Prefilling: 1 },
      { Streaming: 1 },
      {},
    ]);
    // Prefill of the second attempt went out at t=6, its first tokens came at t=25; reported under the client's rid.
    const timed = steps.flatMap((s) => s.effects.filter((e) => e.kind === 'transferTimed'));
    expect(timed).toEqual([{ kind: 'transferTimed', rid, ms: 19 }]);
  });
});
