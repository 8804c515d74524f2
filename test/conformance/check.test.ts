// The conformance checker accepts hand-written traces the model allows and refuses, at the
// right event and for the right reason, traces that break one of its properties.
import { describe, expect, it } from 'vitest';
import type { TraceEvent } from '../../src/transfer/index.js';
import { checkTrace, type CheckResult } from '../../spec/conformance/index.js';
import { chunk, d0, decodeAndSucceed, done, happyPath, p0, reserveAndPrefill, router } from './trace-builder.js';

/** Expects the checker to refuse `trace` exactly at `bad`, with a reason matching `why`. */
function expectRefusedAt(trace: TraceEvent[], bad: TraceEvent, why: RegExp): void {
  const result: CheckResult = checkTrace(trace);
  expect(result.ok, 'the checker accepted a trace the model forbids').toBe(false);
  if (result.ok) return;
  expect(result.index).toBe(trace.indexOf(bad));
  expect(result.event).toBe(bad);
  expect(result.reason).toMatch(why);
}

/** r1 reserved pages 0 and 1 in epoch 1, one chunk landed; then the client went away. */
function abortedMidTransfer(): TraceEvent[] {
  return [
    ...reserveAndPrefill('r1', [
      [0, 1],
      [1, 1],
    ]),
    ...chunk('r1', [0, 1], true),
    p0.send('r1', 'KvChunk', 'd0'), // the second chunk is in flight
    router.state('r1', 'Prefilling', 'Cancelling'),
    router.send('r1', 'Abort', 'd0'),
    router.send('r1', 'Abort', 'p0'),
    router.outcome('r1', 'error', 'client_disconnected'),
    d0.recv('r1', 'Abort', 'router'),
    d0.page('r1', 'quarantine', [0, 1], [1, 1]),
    d0.state('r1', 'Receiving', 'Aborting'),
    d0.send('r1', 'Abort', 'p0'),
    d0.send('r1', 'AbortAck', 'router'),
  ];
}

/** ... and the late chunk lands in the quarantined page; p0 stops and acks; d0 releases. */
function abortedAndReleased(): TraceEvent[] {
  return [
    ...abortedMidTransfer(),
    d0.recv('r1', 'KvChunk', 'p0'),
    d0.page('r1', 'write', [1, 1]),
    d0.page('r1', 'stamp', [1, 1]),
    p0.recv('r1', 'Abort', 'router'),
    p0.state('r1', 'Computing', 'Aborted'),
    p0.send('r1', 'AbortAck', 'd0'),
    d0.recv('r1', 'AbortAck', 'p0'),
    d0.page('r1', 'release', [0, 1], [1, 1]),
    d0.state('r1', 'Aborting', 'Released'),
    router.recv('r1', 'AbortAck', 'd0'),
    router.state('r1', 'Cancelling', 'Failed'),
  ];
}

describe('checkTrace accepts what the model allows', () => {
  it('a request that succeeds, and a second one on the same pages in a new epoch', () => {
    expect(checkTrace([...happyPath('r1', 1), ...happyPath('r2', 2)], { complete: true })).toEqual({ ok: true });
  });

  it('a client disconnect mid-transfer: quarantine, a late write into the quarantined page, release after AbortAck', () => {
    expect(checkTrace([...abortedAndReleased(), ...happyPath('r2', 2)], { complete: true })).toEqual({ ok: true });
  });

  it("a prefill crash: decode frees the pages when the writer's connection closes", () => {
    const trace = [
      ...reserveAndPrefill('r1', [
        [0, 1],
        [1, 1],
      ]),
      ...chunk('r1', [0, 1], true),
      d0.close('p0'),
      d0.page('r1', 'free', [0, 1], [1, 1]),
      d0.state('r1', 'Receiving', 'Released'),
      d0.send('r1', 'Failed', 'router'),
      router.recv('r1', 'Failed', 'd0'),
      router.state('r1', 'Prefilling', 'Failed'),
      router.outcome('r1', 'error', 'transfer_failed'),
    ];
    expect(checkTrace(trace, { complete: true })).toEqual({ ok: true });
  });

  it('admission: prefill rejects a prompt that does not fit, decode gives its reservation back on the unsolicited AbortAck', () => {
    const trace = [
      ...reserveAndPrefill('r1', [
        [0, 1],
        [1, 1],
        [2, 1],
      ]).slice(0, -1),
      p0.state('r1', 'Idle', 'Aborted'),
      p0.send('r1', 'Rejected', 'router'),
      p0.send('r1', 'AbortAck', 'd0'),
      router.recv('r1', 'Rejected', 'p0'),
      router.state('r1', 'Prefilling', 'Failed'),
      router.outcome('r1', 'error', 'context_length_exceeded'),
      d0.recv('r1', 'AbortAck', 'p0'),
      d0.page('r1', 'free', [0, 1], [1, 1], [2, 1]),
      d0.state('r1', 'AwaitingKv', 'Released'),
    ];
    expect(checkTrace(trace, { complete: true })).toEqual({ ok: true });
  });
});

describe('checkTrace refuses what the model forbids', () => {
  it('(a) a read of a page in a stale epoch', () => {
    const tags: [number, number][] = [
      [0, 2],
      [1, 2],
    ];
    const trace = [
      ...happyPath('r1', 1),
      ...reserveAndPrefill('r2', tags),
      ...chunk('r2', [0, 2], true),
      ...chunk('r2', [1, 2], false),
      ...done('r2'),
    ];
    const bad = d0.page('r2', 'read', [0, 2], [1, 1]); // page 1 with r1's tag
    expectRefusedAt([...trace, bad, ...decodeAndSucceed('r2', tags)], bad, /epoch 2/);
  });

  it('(b) a success outcome after a failure: the router reports success for a request it cancelled', () => {
    const trace = [...happyPath('r1', 1)];
    const i = trace.findIndex((e) => e.kind === 'recv' && e.message === 'Tokens');
    const cancelled = [
      ...trace.slice(0, i + 2), // Tokens received: Streaming
      router.state('r1', 'Streaming', 'Cancelling'),
      router.send('r1', 'Abort', 'd0'),
      ...trace.slice(i + 2, -3), // decode finishes anyway: Finished is in flight
      router.recv('r1', 'Finished', 'd0'),
      router.state('r1', 'Cancelling', 'Failed'),
    ];
    const bad = router.outcome('r1', 'success');
    expectRefusedAt([...cancelled, bad], bad, /already failed, rejected or aborted/);
  });

  it('(c) a free while the writer has not acked', () => {
    const trace = abortedMidTransfer();
    const q = trace.findIndex((e) => e.kind === 'page' && e.action === 'quarantine');
    const bad = d0.page('r1', 'free', [0, 1], [1, 1]); // free-before-ack: free instead of quarantine
    expectRefusedAt([...trace.slice(0, q), bad, ...trace.slice(q + 1)], bad, /may still write: no AbortAck/);
  });

  it('(c) a release of quarantined pages before the AbortAck', () => {
    const bad = d0.page('r1', 'release', [0, 1], [1, 1]);
    expectRefusedAt([...abortedMidTransfer(), bad], bad, /may still write/);
  });

  it('(c) a late write into a page that was freed and given to another request', () => {
    const trace = [
      ...reserveAndPrefill('r1', [
        [0, 1],
        [1, 1],
      ]),
      ...chunk('r1', [0, 1], true),
      p0.send('r1', 'KvChunk', 'd0'), // lands only after the page was reused
      d0.close('p0'),
      d0.page('r1', 'free', [0, 1], [1, 1]),
      d0.state('r1', 'Receiving', 'Released'),
      d0.page('r2', 'allocate', [0, 2], [1, 2]),
      d0.recv('r1', 'KvChunk', 'p0'),
    ];
    const bad = d0.page('r1', 'write', [1, 1]);
    expectRefusedAt([...trace, bad], bad, /free for nobody|allocated for r2/);
  });

  it('decode starting before coverage: KvDone overtook a chunk (or the placeholder claimed it)', () => {
    const trace = [
      ...reserveAndPrefill('r1', [
        [0, 1],
        [1, 1],
      ]),
      ...chunk('r1', [0, 1], true),
      p0.send('r1', 'KvDone', 'd0'),
      p0.state('r1', 'Computing', 'AwaitingAck'),
      d0.recv('r1', 'KvDone', 'p0'),
    ];
    const bad = d0.state('r1', 'Receiving', 'Decoding');
    expectRefusedAt([...trace, bad], bad, /without full coverage: page 1@1 carries a stamp of epoch 0/);
  });

  it("decode starting on stale pages: the stamps are from the previous owner's epoch", () => {
    const trace = [
      ...happyPath('r1', 1),
      ...reserveAndPrefill('r2', [
        [0, 2],
        [1, 2],
      ]),
      ...chunk('r2', [0, 2], true),
      p0.send('r2', 'KvDone', 'd0'),
      p0.state('r2', 'Computing', 'AwaitingAck'),
      d0.recv('r2', 'KvDone', 'p0'),
    ];
    const bad = d0.state('r2', 'Receiving', 'Decoding');
    expectRefusedAt([...trace, bad], bad, /page 1@2 carries a stamp of epoch 1/);
  });

  it('a prefill that forgot an Abort acks it without ending the request (no tombstone)', () => {
    const bad = p0.send('r1', 'AbortAck', 'd0');
    expectRefusedAt([router.state('r1', 'Idle', 'Reserving'), bad], bad, /sends AbortAck for r1 in state Idle/);
  });

  it('bookkeeping: a recv nobody sent, an edge the model lacks, a busy page, a reused epoch, two outcomes', () => {
    const recv = d0.recv('r1', 'KvDone', 'p0');
    expectRefusedAt([recv], recv, /never sent it/);
    const edge = d0.state('r1', 'Idle', 'Decoding');
    expectRefusedAt([edge], edge, /not an edge/);
    const busy = d0.page('r2', 'allocate', [0, 2]);
    expectRefusedAt([d0.page('r1', 'allocate', [0, 1]), busy], busy, /allocated for r1/);
    const reused = p0.page('r2', 'allocate', [0, 1]); // prefill's own pool: frees need no ack
    expectRefusedAt(
      [p0.page('r1', 'allocate', [0, 1]), p0.page('r1', 'free', [0, 1]), reused],
      reused,
      /reuses epoch 1/,
    );
    const second = router.outcome('r1', 'error');
    expectRefusedAt([...happyPath('r1', 1), second], second, /second outcome/);
  });

  it('with complete: a trace that ends with pages still held', () => {
    const trace = abortedMidTransfer();
    const result = checkTrace(trace, { complete: true });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(/ends with .* in|quarantined/);
    expect(checkTrace(trace).ok).toBe(true); // a prefix of a valid run
  });
});
