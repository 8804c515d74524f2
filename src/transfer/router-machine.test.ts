import { describe, expect, it } from 'vitest';
import { asEpoch, asPageId, asRequestId, asTenantId, samplingParams } from '../core/index.js';
import type { Message } from './messages.js';
import { RouterMachine, type ClientRequest, type RouterEffect } from './router-machine.js';

const rid = asRequestId('r1');
const request: ClientRequest = {
  rid,
  tenant: asTenantId('t0'),
  tokens: [1, 2, 3, 4, 5],
  sampling: samplingParams({ maxTokens: 3 }),
};
const TAGS = [
  { page: asPageId(0), epoch: asEpoch(1) },
  { page: asPageId(1), epoch: asEpoch(2) },
];

function setup(contextLength = 64) {
  const prefills = ['p0', 'p1'];
  const r = new RouterMachine({
    node: 'router',
    contextLength,
    pickPair: (_req, avoid) => {
      const prefill = prefills.find((p) => !avoid.prefills.includes(p));
      return prefill === undefined ? undefined : { prefill, decode: 'd0' };
    },
    timeouts: { reserveMs: 10, prefillMs: 100, tokenMs: 20, cancelMs: 10 },
  });
  const recv = (from: string, message: Message, now = 0) => r.handle(now, { kind: 'received', from, message });
  const reserved = (attempt = rid) =>
    recv('d0', { type: 'Reserved', rid: attempt, tags: TAGS, pageSize: 4, dataAddress: 'd0' });
  return { r, recv, reserved };
}

const sends = (effects: readonly RouterEffect[]) =>
  effects.flatMap((e) => (e.kind === 'send' ? [[e.to, e.message.type, e.message.rid]] : []));
const outcomes = (effects: readonly RouterEffect[]) =>
  effects.flatMap((e) => (e.kind === 'clientOutcome' ? [e.outcome] : []));

describe('RouterMachine', () => {
  it('refuses a prompt over its context length before any Reserve', () => {
    const { r } = setup(7);
    const effects = r.handle(0, { kind: 'submit', request });
    expect(sends(effects)).toEqual([]);
    expect(outcomes(effects)).toEqual([
      { ok: false, error: expect.objectContaining({ code: 'context_length_exceeded' }) },
    ]);
  });

  it('relays Reserve -> Reserved -> Prefill, streams tokens, and succeeds on Finished with every token', () => {
    const { r, recv, reserved } = setup();
    const submit = r.handle(0, { kind: 'submit', request });
    expect(submit).toEqual([
      {
        kind: 'send',
        to: 'd0',
        message: expect.objectContaining({ type: 'Reserve', rid, promptTokens: 5, prefillAddress: 'p0' }),
      },
    ]);
    expect(reserved()).toEqual([
      {
        kind: 'send',
        to: 'p0',
        message: expect.objectContaining({
          type: 'Prefill',
          rid,
          tags: TAGS,
          decodeAddress: 'd0',
          tokens: [1, 2, 3, 4, 5],
        }),
      },
    ]);
    expect(recv('d0', { type: 'Tokens', rid, offset: 0, ids: [9, 8], logprobs: [] }, 7)).toEqual([
      { kind: 'transferTimed', rid, ms: 7 },
      { kind: 'clientTokens', rid, ids: [9, 8], logprobs: [] },
    ]);
    recv('d0', { type: 'Tokens', rid, offset: 2, ids: [7], logprobs: [] });
    const done = recv('d0', { type: 'Finished', rid, finishReason: 'length', promptTokens: 5, completionTokens: 3 });
    expect(outcomes(done)).toEqual([
      { ok: true, attempt: rid, finishReason: 'length', promptTokens: 5, completionTokens: 3 },
    ]);
    expect(r.stateOf(rid)).toBe('Succeeded');
  });

  it('never reports success when tokens were lost or reordered, and cancels through the acknowledged path', () => {
    const { r, recv, reserved } = setup();
    r.handle(0, { kind: 'submit', request });
    reserved();
    recv('d0', { type: 'Tokens', rid, offset: 0, ids: [9], logprobs: [] });
    const gap = recv('d0', { type: 'Tokens', rid, offset: 2, ids: [7], logprobs: [] });
    expect(outcomes(gap)).toEqual([{ ok: false, error: expect.objectContaining({ code: 'transfer_failed' }) }]);
    expect(sends(gap)).toEqual([['d0', 'Abort', rid]]);
    expect(
      outcomes(recv('d0', { type: 'Finished', rid, finishReason: 'stop', promptTokens: 5, completionTokens: 1 })),
    ).toEqual([]);
    recv('d0', { type: 'AbortAck', rid });
    expect(r.stateOf(rid)).toBe('Failed');
  });

  it('turns a client disconnect while prefilling into Abort to decode and prefill, never a cut', () => {
    const { r, recv, reserved } = setup();
    r.handle(0, { kind: 'submit', request });
    reserved();
    const gone = r.handle(1, { kind: 'clientGone', rid });
    expect(sends(gone)).toEqual([
      ['d0', 'Abort', rid],
      ['p0', 'Abort', rid],
    ]);
    expect(outcomes(gone)).toEqual([{ ok: false, error: expect.objectContaining({ code: 'aborted' }) }]);
    expect(r.stateOf(rid)).toBe('Cancelling');
    recv('d0', { type: 'AbortAck', rid });
    expect(r.stateOf(rid)).toBe('Failed');
  });

  it('retries a prefill failure before any token on another prefill, with a fresh reservation', () => {
    const { r, recv, reserved } = setup();
    r.handle(0, { kind: 'submit', request });
    reserved();
    const failed = recv('p0', { type: 'Failed', rid, code: 'internal', message: 'compute crashed' });
    expect(outcomes(failed)).toEqual([]);
    const retry = asRequestId('r1.2');
    expect(failed).toEqual([
      {
        kind: 'send',
        to: 'd0',
        message: expect.objectContaining({ type: 'Reserve', rid: retry, prefillAddress: 'p1' }),
      },
    ]);
    reserved(retry);
    recv('d0', { type: 'Tokens', rid: retry, offset: 0, ids: [1], logprobs: [] });
    const done = recv('d0', {
      type: 'Finished',
      rid: retry,
      finishReason: 'stop',
      promptTokens: 5,
      completionTokens: 1,
    });
    expect(outcomes(done)).toEqual([expect.objectContaining({ ok: true, attempt: retry })]);
    // A second failure, with no prefill left, is the client's error.
    const two = setup();
    two.r.handle(0, { kind: 'submit', request });
    two.reserved();
    two.recv('p0', { type: 'Failed', rid, code: 'internal', message: 'x' });
    two.reserved(retry);
    expect(outcomes(two.recv('p1', { type: 'Failed', rid: retry, code: 'internal', message: 'y' }))).toEqual([
      { ok: false, error: expect.objectContaining({ message: 'y' }) },
    ]);
  });

  it('retries when decode gives the transfer up before any token (e.g. its writer died), and stops that prefill', () => {
    const { r, recv, reserved } = setup();
    r.handle(0, { kind: 'submit', request });
    reserved();
    const failed = recv('d0', {
      type: 'Failed',
      rid,
      code: 'transfer_failed',
      message: 'the connection to prefill p0 closed during the transfer',
    });
    expect(outcomes(failed)).toEqual([]);
    expect(sends(failed)).toEqual([
      ['p0', 'Abort', rid],
      ['d0', 'Reserve', 'r1.2'],
    ]);
    expect(failed.find((e) => e.kind === 'send' && e.message.type === 'Reserve')).toMatchObject({
      message: { prefillAddress: 'p1' },
    });
  });

  it('does not retry a prefill admission rejection', () => {
    const { r, recv, reserved } = setup();
    r.handle(0, { kind: 'submit', request });
    reserved();
    const rejected = recv('p0', { type: 'Rejected', rid, code: 'pool_too_small', message: 'too long for p0' });
    expect(outcomes(rejected)).toEqual([{ ok: false, error: expect.objectContaining({ code: 'pool_too_small' }) }]);
    expect(sends(rejected)).toEqual([]);
  });

  it('times out every wait with a TimeoutError and cancels', () => {
    const { r } = setup();
    r.handle(0, { kind: 'submit', request });
    expect(r.wakeAtMs()).toBe(10);
    const effects = r.handle(10, { kind: 'tick' });
    expect(outcomes(effects)).toEqual([
      {
        ok: false,
        error: expect.objectContaining({ code: 'timeout', waitedFor: expect.stringContaining('Reserved from d0') }),
      },
    ]);
    expect(sends(effects)).toEqual([['d0', 'Abort', rid]]);
    r.handle(20, { kind: 'tick' });
    expect(r.stateOf(rid)).toBe('Failed');
    expect(r.numActive).toBe(0);
  });

  it('fails a request whose decode connection closes, and stops its prefill', () => {
    const { r, reserved } = setup();
    r.handle(0, { kind: 'submit', request });
    reserved();
    const effects = r.handle(1, { kind: 'closed', peer: 'd0', reason: 'reset' });
    expect(sends(effects)).toEqual([['p0', 'Abort', rid]]);
    expect(outcomes(effects)).toEqual([{ ok: false, error: expect.objectContaining({ code: 'transfer_failed' }) }]);
  });
});
