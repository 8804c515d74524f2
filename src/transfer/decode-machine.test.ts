import { describe, expect, it } from 'vitest';
import {
  asEpoch,
  asPageId,
  asRequestId,
  asTenantId,
  FaultSet,
  KV_DTYPES,
  NO_FAULTS,
  samplingParams,
  type FaultName,
  type KvDtype,
  type Tag,
} from '../core/index.js';
import type { PagePool } from '../pages/index.js';
import { firstForeignPosition, makePool, owner, PAGE_SIZE, writePositions } from '../../test/sim/transfer/kit.js';
import { DecodeMachine } from './decode-machine.js';
import type { DecodeEffect } from './decode-types.js';
import { chunkChecksum, promptDigest, TransferDigest } from './digests.js';
import { LedgerDecodeHost } from './hosts.js';
import type { KvChunk, KvDone, Message } from './messages.js';

const MODEL = '5eed5eed5eed5eed';

const R = 'router';
const P = 'p0';
const TOKENS = [5, 6, 7, 8, 9, 10]; // 6 tokens: page 0 full, page 1 holds 2 slots

function setup(options: { numPages?: number; faults?: FaultName[]; contextLength?: number; dtype?: KvDtype } = {}) {
  const faults = new FaultSet(options.faults ?? []);
  const pool = makePool(options.numPages ?? 8, faults, options.dtype);
  const host = new LedgerDecodeHost({ pool, model: MODEL, contextLength: options.contextLength ?? 64, faults });
  const m = new DecodeMachine({
    node: 'd0',
    host,
    faults,
    timeouts: { kvStartMs: 100, frameMs: 50, abortAckMs: 20, abortRetries: 2 },
  });
  let now = 0;
  const step = (input: Parameters<DecodeMachine['handle']>[1], at = now): DecodeEffect[] => {
    now = at;
    return m.handle(now, input);
  };
  const recv = (from: string, message: Message, at?: number) => step({ kind: 'received', from, message }, at);
  const reserve = (rid: string, tokens = TOKENS, maxTokens = 4) => {
    const effects = recv(R, {
      type: 'Reserve',
      rid: asRequestId(rid),
      tenant: asTenantId('t0'),
      promptTokens: tokens.length,
      promptDigest: promptDigest(tokens),
      sampling: samplingParams({ maxTokens }),
      prefillAddress: P,
    });
    const reply = sent(effects, R)[0];
    return { effects, reply, tags: reply?.type === 'Reserved' ? reply.tags : [] };
  };
  return { pool, m, step, recv, reserve };
}

function sent(effects: readonly DecodeEffect[], to: string): Message[] {
  return effects.flatMap((e) => (e.kind === 'send' && e.to === to ? [e.message] : []));
}

/** The frames an honest prefill sends for rid's first `numTokens` positions into `dstTags`. */
function frames(rid: string, dstTags: readonly Tag[], numTokens: number, tokens = TOKENS, dtype: KvDtype = 'f32') {
  const src = makePool(8, NO_FAULTS, dtype);
  const who = owner(rid);
  const alloc = src.ledger.allocate(Math.ceil(numTokens / PAGE_SIZE), who);
  if (alloc.kind !== 'allocated') throw new Error('source pool too small');
  writePositions(src, who, alloc.tags, 0, numTokens);
  const digest = new TransferDigest();
  const chunks: KvChunk[] = [];
  for (let pos = 0, seq = 0; pos < numTokens; seq++) {
    const index = Math.floor(pos / PAGE_SIZE);
    const numSlots = Math.min(PAGE_SIZE, numTokens - pos);
    const payload = src.gatherSlots((alloc.tags[index] as Tag).page, 0, numSlots);
    const header = {
      rid: asRequestId(rid),
      seq,
      tag: dstTags[index] as Tag,
      firstSlot: 0,
      numSlots,
      kvDtype: src.kv.dtype,
    };
    const checksum = chunkChecksum(header, payload);
    digest.add(checksum);
    chunks.push({ type: 'KvChunk', ...header, checksum, payload });
    pos += numSlots;
  }
  const done: KvDone = {
    type: 'KvDone',
    rid: asRequestId(rid),
    numChunks: chunks.length,
    tokensCovered: tokens.length,
    digest: digest.hex(),
    promptDigest: promptDigest(tokens),
    model: MODEL,
    firstToken: 42,
    firstLogprobs: [],
  };
  return { chunks, done };
}

function counts(pool: PagePool) {
  return pool.ledger.counts();
}

describe('DecodeMachine: the happy path', () => {
  it('reserves tagged pages, writes checked chunks, verifies coverage, acks and hands over', () => {
    const d = setup();
    const { reply, tags } = d.reserve('r1');
    expect(reply).toMatchObject({ type: 'Reserved', pageSize: PAGE_SIZE, dataAddress: 'd0' });
    expect(tags).toEqual([
      { page: 0, epoch: 1 },
      { page: 1, epoch: 2 },
    ]);
    const { chunks, done } = frames('r1', tags, 6);
    for (const c of chunks) expect(d.recv(P, c)).toEqual([]);
    expect(d.m.stateOf(asRequestId('r1'))).toBe('Receiving');
    const effects = d.recv(P, done);
    expect(sent(effects, P)).toEqual([{ type: 'Ack', rid: 'r1' }]);
    expect(effects).toContainEqual(
      expect.objectContaining({ kind: 'startDecoding', rid: 'r1', tags, promptTokens: 6, firstToken: 42 }),
    );
    expect(firstForeignPosition(d.pool, 'r1', tags, 6)).toBe(-1);
    expect(sent(d.step({ kind: 'decodeTokens', rid: asRequestId('r1'), ids: [7, 8], logprobs: [] }), R)).toEqual([
      { type: 'Tokens', rid: 'r1', offset: 0, ids: [42, 7, 8], logprobs: [] },
    ]);
    expect(sent(d.step({ kind: 'decodeFinished', rid: asRequestId('r1'), finishReason: 'length' }), R)).toEqual([
      { type: 'Finished', rid: 'r1', finishReason: 'length', promptTokens: 6, completionTokens: 3 },
    ]);
    expect(d.m.stateOf(asRequestId('r1'))).toBe('Finished');
  });
});

describe('DecodeMachine: the transfer time is an explicit field, not read off the trace', () => {
  it("startDecoding carries the time from the first landed frame to KvDone, on the machine's clock", () => {
    const d = setup();
    const { tags } = d.reserve('r1');
    const { chunks, done } = frames('r1', tags, 6);
    chunks.forEach((c, i) => d.recv(P, c, 100 + 10 * i));
    const effects = d.recv(P, done, 175);
    expect(effects).toContainEqual(expect.objectContaining({ kind: 'startDecoding', rid: 'r1', transferMs: 75 }));
  });
});

describe('DecodeMachine: admission before any allocation', () => {
  it.each([
    ['context_length_exceeded', { contextLength: 9 }, 4],
    ['pool_too_small', { numPages: 2 }, 4],
    ['overloaded', { numPages: 3 }, 1],
  ] as const)('rejects with %s and allocates nothing', (code, options, maxTokens) => {
    const d = setup(options);
    if (code === 'overloaded') d.reserve('busy', [1, 2, 3, 4, 5], 1); // takes 2 of 3 pages
    const before = counts(d.pool);
    const { reply } = d.reserve('r1', TOKENS, maxTokens);
    expect(reply).toMatchObject({ type: 'Rejected', code });
    expect(counts(d.pool)).toEqual(before);
    expect(d.m.stateOf(asRequestId('r1'))).toBe('Released');
  });

  it('remembers an Abort that overtook its Reserve, and allocates nothing for the late Reserve', () => {
    const d = setup();
    expect(sent(d.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'client-disconnect' }), R)).toEqual([
      { type: 'AbortAck', rid: 'r1' },
    ]);
    expect(d.reserve('r1').effects).toEqual([]);
    expect(counts(d.pool).free).toBe(8);
  });
});

describe('DecodeMachine: every frame is checked', () => {
  it("drops a frame whose tag names a page in an epoch that is not the request's (a late frame of a reused page)", () => {
    for (const faults of [[], ['skip-tag-check']] as FaultName[][]) {
      const d = setup({ numPages: 2, faults });
      const first = d.reserve('r1', TOKENS, 2);
      d.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'router' });
      d.recv(P, { type: 'AbortAck', rid: asRequestId('r1') });
      const { tags } = d.reserve('r2', TOKENS, 2); // the same pages, new epochs
      expect(tags.map((t) => t.page)).toEqual([0, 1]);
      expect(tags.map((t) => t.epoch)).toEqual([3, 4]);
      // r2's own frame 0 is written; then a confused sender replays r1's page-0 frame (epoch 1) under r2.
      const own = frames('r2', tags, 6).chunks[0] as KvChunk;
      d.recv(P, own);
      const stale = frames('r1', first.tags, 6).chunks[1] as KvChunk;
      const replay: KvChunk = {
        ...stale,
        rid: asRequestId('r2'),
        seq: 1,
        tag: { page: asPageId(0), epoch: asEpoch(1) },
        firstSlot: 0,
      };
      const replayed = { ...replay, checksum: chunkChecksum(replay, replay.payload) };
      d.recv(P, replayed);
      const overwritten = firstForeignPosition(d.pool, 'r2', tags, 4) >= 0;
      // The negative control: with the tag check off, the stale frame lands in r2's page.
      expect(overwritten).toBe(faults.length > 0);
    }
  });

  it('fails the transfer closed on a flipped bit, every time; skip-checksum lets it through', () => {
    for (const faults of [[], ['skip-checksum']] as FaultName[][]) {
      const d = setup({ faults });
      const { tags } = d.reserve('r1');
      const { chunks, done } = frames('r1', tags, 6);
      const bad = chunks[1] as KvChunk;
      const payload = bad.payload.slice();
      payload[3] = (payload[3] as number) ^ 0x10;
      d.recv(P, chunks[0] as KvChunk);
      const effects = [...d.recv(P, { ...bad, payload }), ...d.recv(P, done)];
      const decoded = effects.some((e) => e.kind === 'startDecoding');
      expect(decoded).toBe(faults.length > 0);
      if (faults.length === 0) {
        expect(sent(effects, R)).toEqual([expect.objectContaining({ type: 'Failed', code: 'transfer_failed' })]);
        expect(sent(effects, P)).toEqual([{ type: 'Abort', rid: 'r1', reason: 'decode-failed' }]);
        expect(counts(d.pool).quarantined).toBe(2);
        expect(d.m.stats().checksumFailures).toBe(1);
      } else {
        expect(firstForeignPosition(d.pool, 'r1', tags, 6)).toBeGreaterThanOrEqual(0);
      }
    }
  });

  it.each([
    ['a gap', (c: KvChunk[]) => [c[1] as KvChunk]],
    ['a repeat', (c: KvChunk[]) => [c[0] as KvChunk, c[0] as KvChunk]],
  ])('fails the transfer closed on %s in seq', (_name, pick) => {
    const d = setup();
    const { tags } = d.reserve('r1');
    const effects = pick(frames('r1', tags, 6).chunks).flatMap((c) => d.recv(P, c));
    expect(sent(effects, R)).toEqual([
      expect.objectContaining({ type: 'Failed', message: expect.stringContaining('seq') }),
    ]);
    expect(d.m.stateOf(asRequestId('r1'))).toBe('Aborting');
  });

  it('drops frames from a peer other than the prefill named in Reserve', () => {
    const d = setup();
    const { tags } = d.reserve('r1');
    d.recv('p1', frames('r1', tags, 6).chunks[0] as KvChunk);
    expect(d.m.stateOf(asRequestId('r1'))).toBe('AwaitingKv');
    expect(d.pool.stampOf(asPageId(0)).epoch).toBe(0);
  });
});

describe('DecodeMachine: coverage comes from its own stamps (the incident)', () => {
  it.each(KV_DTYPES)(
    '%s KV: refuses KvDone that claims the whole prompt after only the first page; skip-page-check decodes stale pages',
    (dtype) => {
      for (const faults of [[], ['skip-page-check']] as FaultName[][]) {
        const d = setup({ numPages: 2, faults, dtype });
        expect(d.pool.kv.dtype).toBe(dtype);
        // An earlier request leaves its data in page 1 (pages are never zeroed).
        const old = d.reserve('old', TOKENS, 2);
        const full = frames('old', old.tags, 6, TOKENS, dtype);
        for (const c of full.chunks) d.recv(P, c);
        d.recv(P, full.done);
        d.step({ kind: 'decodeFinished', rid: asRequestId('old'), finishReason: 'stop' });
        d.pool.ledger.free(old.tags, owner('old')); // the decoder gives its pages back
        const { tags } = d.reserve('r1', TOKENS, 2);
        const { chunks } = frames('r1', tags, 6, TOKENS, dtype);
        d.recv(P, chunks[0] as KvChunk); // placeholder-done: page 0 only ...
        const done: KvDone = {
          type: 'KvDone',
          rid: asRequestId('r1'),
          numChunks: 1,
          tokensCovered: 6,
          digest: digestOf([chunks[0] as KvChunk]),
          promptDigest: promptDigest(TOKENS),
          model: MODEL,
          firstToken: 1,
          firstLogprobs: [],
        };
        const effects = d.recv(P, done); // ... claiming all 6 tokens
        const started = effects.some((e) => e.kind === 'startDecoding');
        expect(started).toBe(faults.length > 0);
        if (started)
          expect(firstForeignPosition(d.pool, 'r1', tags, 6)).toBe(4); // the decoder would read old's data
        else
          expect(sent(effects, R)).toEqual([
            expect.objectContaining({ type: 'Failed', message: expect.stringContaining('stamps cover 4 of') }),
          ]);
      }
    },
  );
});

describe('DecodeMachine: KV stored in another dtype is never landed', () => {
  it('fails the transfer closed on a KvChunk whose KV dtype is not its own, before a byte lands, with a clear error', () => {
    for (const [mine, theirs] of [
      ['f32', 'f16'],
      ['f16', 'f32'],
      ['q8_0', 'f16'],
      ['f16', 'q8_0'],
      ['q8_0', 'f32'],
    ] as const) {
      const d = setup({ dtype: mine });
      const { tags } = d.reserve('r1');
      const { chunks } = frames('r1', tags, 6, TOKENS, theirs);
      const before = d.pool.kv.data.slice();
      const effects = d.recv(P, chunks[0] as KvChunk);
      expect(sent(effects, R)).toEqual([
        expect.objectContaining({
          type: 'Failed',
          code: 'transfer_failed',
          message: `r1: KvChunk carries ${theirs} KV, but this decode stores ${mine} (--kv-dtype differs between prefill and decode): the cluster is misconfigured`,
        }),
      ]);
      expect(d.pool.kv.data).toEqual(before);
      expect(d.pool.stampOf(tags[0]!.page).filledSlots).toBe(0);
      // The same frames in its own dtype land and verify.
      const own = setup({ dtype: mine });
      const ownTags = own.reserve('r1').tags;
      const honest = frames('r1', ownTags, 6, TOKENS, mine);
      for (const c of honest.chunks) expect(own.recv(P, c)).toEqual([]);
      expect(sent(own.recv(P, honest.done), P)).toEqual([{ type: 'Ack', rid: 'r1' }]);
    }
  });
});

describe('DecodeMachine: KV stored in another dtype (negative control)', () => {
  it('with skip-kv-dtype-check the f16 chunk is not refused for its dtype: only the byte count catches it, and says nothing of --kv-dtype', () => {
    const d = setup({ dtype: 'f32', faults: ['skip-kv-dtype-check'] });
    const { tags } = d.reserve('r1');
    const { chunks } = frames('r1', tags, 6, TOKENS, 'f16');
    const failed = sent(d.recv(P, chunks[0] as KvChunk), R);
    expect(failed).toEqual([expect.objectContaining({ type: 'Failed', code: 'transfer_failed' })]);
    expect(JSON.stringify(failed)).not.toMatch(/--kv-dtype/);
    expect(JSON.stringify(failed)).toMatch(/carries \d+ bytes, not \d+/);
  });
});

describe('DecodeMachine: KV computed by another model is never decoded', () => {
  it('fails a transfer whose KvDone carries another model fingerprint; skip-model-check decodes it', () => {
    for (const faults of [[], ['skip-model-check']] as FaultName[][]) {
      const d = setup({ faults });
      const { tags } = d.reserve('r1');
      const { chunks, done } = frames('r1', tags, 6);
      for (const c of chunks) d.recv(P, c);
      const effects = d.recv(P, { ...done, model: 'e0e0e0e0e0e0e0e0' });
      const started = effects.some((e) => e.kind === 'startDecoding');
      expect(started).toBe(faults.length > 0);
      if (!started) {
        expect(sent(effects, R)).toEqual([
          expect.objectContaining({
            type: 'Failed',
            code: 'transfer_failed',
            message: expect.stringMatching(/another model .*this decode serves 5eed5eed5eed5eed/),
          }),
        ]);
        expect(sent(effects, P)).not.toContainEqual({ type: 'Ack', rid: 'r1' });
      }
    }
  });
});

describe('DecodeMachine: KV computed under a LoRA adapter is decoded only under the same one', () => {
  it('fails a transfer whose KvDone names an adapter the Reserve did not; skip-model-check decodes it', () => {
    for (const faults of [[], ['skip-model-check']] as FaultName[][]) {
      const d = setup({ faults });
      const { tags } = d.reserve('r1'); // the base model
      const { chunks, done } = frames('r1', tags, 6);
      for (const c of chunks) d.recv(P, c);
      const effects = d.recv(P, { ...done, adapter: 'ab'.repeat(16) });
      expect(effects.some((e) => e.kind === 'startDecoding')).toBe(faults.length > 0);
      if (faults.length === 0)
        expect(sent(effects, R)).toEqual([
          expect.objectContaining({
            type: 'Failed',
            code: 'transfer_failed',
            message: expect.stringMatching(/under LoRA adapter abab.*; this request decodes under none/),
          }),
        ]);
    }
  });

  it('a decode serving no adapter refuses a Reserve that names one, before any page', () => {
    const d = setup();
    const before = d.pool.ledger.counts();
    const effects = d.recv(R, {
      type: 'Reserve',
      rid: asRequestId('r1'),
      tenant: asTenantId('t0'),
      promptTokens: 6,
      promptDigest: promptDigest(TOKENS),
      sampling: samplingParams({ maxTokens: 4 }),
      prefillAddress: P,
      adapter: { name: 'a', digest: 'ab'.repeat(16) },
    });
    expect(sent(effects, R)).toEqual([expect.objectContaining({ type: 'Rejected', code: 'model_not_found' })]);
    expect(d.pool.ledger.counts()).toEqual(before);
  });
});

function digestOf(chunks: readonly KvChunk[]): string {
  const d = new TransferDigest();
  for (const c of chunks) d.add(c.checksum);
  return d.hex();
}

describe('DecodeMachine: aborts are acknowledged, pages a writer may write are quarantined', () => {
  it("quarantines on Abort, acks the router, tells the writer, and releases on the writer's AbortAck", () => {
    const d = setup();
    const { tags } = d.reserve('r1');
    d.recv(P, frames('r1', tags, 6).chunks[0] as KvChunk);
    const effects = d.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'client-disconnect' });
    expect(sent(effects, R)).toEqual([{ type: 'AbortAck', rid: 'r1' }]);
    expect(sent(effects, P)).toEqual([{ type: 'Abort', rid: 'r1', reason: 'decode-failed' }]);
    expect(counts(d.pool)).toMatchObject({ quarantined: 2, free: 6 });
    d.recv(P, { type: 'AbortAck', rid: asRequestId('r1') });
    expect(counts(d.pool)).toMatchObject({ quarantined: 0, free: 8 });
    expect(d.m.stateOf(asRequestId('r1'))).toBe('Released');
  });

  it('negative controls: drop-abort-ack never acks; free-before-ack frees pages the writer may still write', () => {
    const noAck = setup({ faults: ['drop-abort-ack'] });
    noAck.reserve('r1');
    expect(sent(noAck.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'router' }), R)).toEqual([]);
    const early = setup({ faults: ['free-before-ack'] });
    early.reserve('r1');
    early.recv(P, { type: 'AbortAck', rid: asRequestId('nothing') }); // P is connected
    early.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'router' });
    expect(counts(early.pool)).toMatchObject({ quarantined: 0, free: 8 });
    expect(early.m.stateOf(asRequestId('r1'))).toBe('Aborting');
  });

  it('re-sends Abort on AbortAck timeouts, then declares the writer dead and releases only when its connection is closed', () => {
    const d = setup();
    d.step({ kind: 'connected', peer: P });
    d.reserve('r1');
    d.recv(P, { type: 'AbortAck', rid: asRequestId('other') }); // P has spoken on this connection
    d.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'router' }, 0);
    expect(d.m.wakeAtMs()).toBe(20);
    expect(sent(d.step({ kind: 'tick' }, 20), P)).toEqual([{ type: 'Abort', rid: 'r1', reason: 'decode-failed' }]);
    expect(sent(d.step({ kind: 'tick' }, 40), P)).toHaveLength(1);
    expect(d.step({ kind: 'tick' }, 60)).toEqual([
      { kind: 'closePeer', peer: P, reason: expect.stringContaining('no AbortAck') },
    ]);
    expect(counts(d.pool).quarantined).toBe(2);
    d.step({ kind: 'closed', peer: P, reason: 'declared dead' }, 61);
    expect(counts(d.pool)).toMatchObject({ quarantined: 0, free: 8 });
  });

  it("frees at once when the writer's connection closes mid-transfer, and tells the router", () => {
    const d = setup();
    const { tags } = d.reserve('r1');
    d.recv(P, frames('r1', tags, 6).chunks[0] as KvChunk);
    const effects = d.step({ kind: 'closed', peer: P, reason: 'reset' });
    expect(sent(effects, R)).toEqual([expect.objectContaining({ type: 'Failed', code: 'transfer_failed' })]);
    expect(counts(d.pool).free).toBe(8);
  });

  it('on a reconnect, ends only the transfers whose frames the closed connection carried', () => {
    const d = setup();
    const one = d.reserve('r1');
    const two = d.reserve('r2');
    d.recv(P, frames('r1', one.tags, 6).chunks[0] as KvChunk);
    const effects = d.step({ kind: 'closed', peer: P, reason: 'replaced by a new connection' });
    expect(sent(effects, R)).toEqual([expect.objectContaining({ type: 'Failed', rid: 'r1' })]);
    expect(d.m.stateOf(asRequestId('r2'))).toBe('AwaitingKv');
    d.step({ kind: 'connected', peer: P });
    const { chunks, done } = frames('r2', two.tags, 6);
    for (const c of chunks) d.recv(P, c);
    expect(d.recv(P, done)).toContainEqual(expect.objectContaining({ kind: 'startDecoding', rid: 'r2' }));
  });

  it('times out waiting for the first frame with a TimeoutError, and quarantines', () => {
    const d = setup();
    d.reserve('r1');
    const effects = d.step({ kind: 'tick' }, 100);
    expect(sent(effects, R)).toEqual([
      expect.objectContaining({
        type: 'Failed',
        code: 'timeout',
        message: expect.stringContaining('timed out after 100 ms'),
      }),
    ]);
    expect(counts(d.pool).quarantined).toBe(2);
  });

  it('stops the decoder on Abort while decoding', () => {
    const d = setup();
    const { tags } = d.reserve('r1');
    const { chunks, done } = frames('r1', tags, 6);
    for (const c of chunks) d.recv(P, c);
    d.recv(P, done);
    const effects = d.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'client-disconnect' });
    expect(effects).toContainEqual(expect.objectContaining({ kind: 'stopDecoding', rid: 'r1' }));
    expect(sent(effects, R)).toEqual([{ type: 'AbortAck', rid: 'r1' }]);
  });
});
