import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { asEpoch, asPageId, asRequestId, asTenantId, samplingParams } from '../core/index.js';
import { Handshake } from './auth.js';
import { isCodecError } from './codec-fields.js';
import {
  CODEC_VERSION,
  decodeAnyFrame,
  decodeFrame,
  encodeFrame,
  encodeFrameParts,
  FrameReader,
  MESSAGE_TYPES,
} from './codec.js';
import type { Message } from './messages.js';

const rid = asRequestId('r1.2');
const tenant = asTenantId('tenant a');
const tag = { page: asPageId(3), epoch: asEpoch(17) };
const D16 = '0123456789abcdef';

const EXAMPLES: Message[] = [
  {
    type: 'Reserve',
    rid,
    tenant,
    promptTokens: 7,
    promptDigest: D16,
    sampling: samplingParams({ maxTokens: 5, stop: ['\n'], temperature: 0.7, topP: 0.9, seed: -3 }),
    prefillAddress: '127.0.0.1:7001',
  },
  {
    type: 'Reserved',
    rid,
    tags: [tag, { page: asPageId(0), epoch: asEpoch(1) }],
    pageSize: 16,
    dataAddress: '127.0.0.1:7002',
  },
  { type: 'Rejected', rid, code: 'pool_too_small', message: 'too long: 900 > 512' },
  {
    type: 'Prefill',
    rid,
    tenant,
    tokens: [1, 2, 3],
    sampling: samplingParams(),
    decodeAddress: '[::1]:7002',
    tags: [tag],
    pageSize: 16,
  },
  {
    type: 'KvChunk',
    rid,
    seq: 4,
    tag,
    firstSlot: 2,
    numSlots: 3,
    kvDtype: 'f16',
    checksum: D16,
    payload: new Uint8Array([1, 2, 3, 4, 5, 250]),
  },
  {
    type: 'KvDone',
    rid,
    numChunks: 5,
    tokensCovered: 7,
    digest: D16,
    promptDigest: D16,
    model: D16,
    firstToken: 31999,
    firstLogprobs: [],
  },
  { type: 'Ack', rid },
  { type: 'Tokens', rid, offset: 3, ids: [9, 8, 7], logprobs: [] },
  { type: 'Finished', rid, finishReason: 'stop', promptTokens: 7, completionTokens: 4 },
  { type: 'Failed', rid, code: 'timeout', message: 'timed out after 5 ms' },
  { type: 'Abort', rid, reason: 'client-disconnect' },
  { type: 'AbortAck', rid },
];

/** A frame with the given JSON header for message kind `type` (and optional payload). */
function rawFrame(type: string, header: unknown, payload = new Uint8Array(0)): Uint8Array {
  const json = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(10 + json.length + payload.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, 6 + json.length + payload.length);
  out[4] = CODEC_VERSION;
  out[5] = MESSAGE_TYPES.indexOf(type as (typeof MESSAGE_TYPES)[number]) + 1;
  view.setUint32(6, json.length);
  out.set(json, 10);
  out.set(payload, 10 + json.length);
  return out;
}

function expectCodecError(f: () => unknown, pattern?: RegExp): void {
  try {
    f();
  } catch (error) {
    expect(isCodecError(error), String(error)).toBe(true);
    if (pattern !== undefined) expect((error as Error).message).toMatch(pattern);
    return;
  }
  throw new Error('expected a CodecError');
}

describe('codec: every message round-trips', () => {
  it.each(EXAMPLES.map((m) => [m.type, m] as const))('%s', (_type, message) => {
    expect(decodeFrame(encodeFrame(message))).toEqual(message);
  });

  it('carries a LoRA adapter in Reserve, Prefill and KvDone; refuses a malformed one', () => {
    const adapter = { name: 'sql-lora', digest: 'ab'.repeat(16) };
    for (const m of EXAMPLES.filter((e) => e.type === 'Reserve' || e.type === 'Prefill'))
      expect(decodeFrame(encodeFrame({ ...m, adapter } as Message))).toEqual({ ...m, adapter });
    const done = EXAMPLES.find((e) => e.type === 'KvDone') as Message;
    expect(decodeFrame(encodeFrame({ ...done, adapter: adapter.digest } as Message))).toMatchObject({
      adapter: adapter.digest,
    });
    const bad = { ...EXAMPLES[0], adapter: { name: '../x', digest: adapter.digest } } as Message;
    expectCodecError(() => decodeFrame(encodeFrame(bad)));
  });

  it('sends a KvChunk payload as raw bytes after the header, without copying it', () => {
    const chunk = EXAMPLES[4] as Extract<Message, { type: 'KvChunk' }>;
    const parts = encodeFrameParts(chunk);
    expect(parts).toHaveLength(2);
    expect(parts[1]).toBe(chunk.payload);
  });

  it('splits a byte stream into frames at any chunk boundaries', () => {
    const frames = EXAMPLES.map(encodeFrame);
    const stream = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
    frames.reduce((at, f) => (stream.set(f, at), at + f.length), 0);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: stream.length }), { maxLength: 20 }), (cuts) => {
        const points = [0, ...cuts.sort((a, b) => a - b), stream.length];
        const reader = new FrameReader();
        const out: Uint8Array[] = [];
        for (let i = 1; i < points.length; i++) out.push(...reader.push(stream.subarray(points[i - 1], points[i])));
        expect(out.map((f) => decodeFrame(f))).toEqual(EXAMPLES);
        expect(reader.bufferedBytes).toBe(0);
      }),
      { numRuns: 200 },
    );
  });
});

describe('codec: strict validation of incoming frames', () => {
  const ok = { rid: 'r1', offset: 0, ids: [1] };
  it.each([
    ['an unknown field', { ...ok, extra: 1 }, /unknown field "extra"/],
    ['a missing field', { rid: 'r1', ids: [1] }, /offset is missing/],
    ['a string for a number', { ...ok, offset: '0' }, /offset must be an integer/],
    ['a negative count', { ...ok, offset: -1 }, /offset must be an integer/],
    ['a fraction', { ...ok, ids: [1.5] }, /ids\[0\] must be an integer/],
    ['a request id with a space', { ...ok, rid: 'r 1' }, /rid must be a string matching/],
    [
      'a prototype key',
      JSON.parse('{"rid":"r1","offset":0,"ids":[1],"__proto__":{"x":1}}'),
      /unknown field "__proto__"/,
    ],
  ])('refuses %s', (_what, header, pattern) => {
    expectCodecError(() => decodeFrame(rawFrame('Tokens', header)), pattern);
  });

  it('refuses bad JSON, bad UTF-8, a payload on a message without one, and a KvChunk without one', () => {
    expectCodecError(() => decodeFrame(rawFrame('Ack', '{"rid":')), /not UTF-8 JSON/);
    expectCodecError(() => decodeFrame(rawFrame('Ack', '\u00ff')), /not UTF-8 JSON|must be an object/);
    const badUtf8 = rawFrame('Ack', '{"rid":"r1"}');
    badUtf8[11] = 0xff;
    expectCodecError(() => decodeFrame(badUtf8), /not UTF-8 JSON/);
    expectCodecError(
      () => decodeFrame(rawFrame('Ack', { rid: 'r1' }, new Uint8Array([1]))),
      /only KvChunk has a payload/,
    );
    expectCodecError(
      () =>
        decodeFrame(
          rawFrame('KvChunk', {
            rid: 'r1',
            seq: 0,
            tag: { page: 0, epoch: 1 },
            firstSlot: 0,
            numSlots: 1,
            kvDtype: 'f32',
            checksum: D16,
          }),
        ),
      /without payload/,
    );
  });

  it('refuses a frame over the size limit from its length prefix alone, before buffering it', () => {
    const reader = new FrameReader(1024);
    const prefix = new Uint8Array([0, 0, 0x10, 0]); // 4096 bytes to come
    expectCodecError(() => reader.push(prefix), /exceeds the limit of 1024/);
  });

  it('refuses a handshake frame where a message is expected', () => {
    const hello = new Handshake({
      secret: 'a-cluster-secret-of-32-bytes!!!!',
      nodeId: 'n1',
      role: 'dialer',
      nonce: new Uint8Array(32),
    }).start();
    expect(decodeAnyFrame(hello).kind).toBe('hello');
    expectCodecError(() => decodeFrame(hello), /unexpected hello frame/);
  });
});

describe('codec: fuzzing', () => {
  it('random bytes never throw anything but a CodecError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        for (const f of [
          () => decodeAnyFrame(bytes),
          () => new FrameReader(256).push(bytes).map((x) => decodeAnyFrame(x)),
        ]) {
          try {
            f();
          } catch (error) {
            if (!isCodecError(error)) throw error;
          }
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('a valid frame with any bytes changed decodes to a valid message or fails with a CodecError', () => {
    const frames = EXAMPLES.map(encodeFrame);
    fc.assert(
      fc.property(
        fc.nat(frames.length - 1),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }),
        (which, edits) => {
          const frame = (frames[which] as Uint8Array).slice();
          for (const [at, value] of edits) frame[at % frame.length] = value;
          try {
            const m = decodeFrame(frame);
            expect(MESSAGE_TYPES).toContain(m.type);
            expect(decodeFrame(encodeFrame(m))).toEqual(m);
          } catch (error) {
            if (!isCodecError(error)) throw error;
          }
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('generated messages round-trip', () => {
    const ridArb = fc.stringMatching(/^[A-Za-z0-9._:~-]{1,40}$/).map(asRequestId);
    const tagArb = fc.record({
      page: fc.nat(1 << 20).map(asPageId),
      epoch: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }).map(asEpoch),
    });
    const messageArb: fc.Arbitrary<Message> = fc.oneof(
      fc.record({
        type: fc.constant('Tokens' as const),
        rid: ridArb,
        offset: fc.nat(),
        ids: fc.array(fc.nat(0x7fffffff)),
        logprobs: fc.array(
          fc.record({
            logprob: fc.double({ min: -9999, max: 0, noNaN: true }).map((x) => x + 0),
            top: fc.array(
              fc.record({
                id: fc.nat(0x7fffffff),
                logprob: fc.double({ min: -9999, max: 0, noNaN: true }).map((x) => x + 0),
              }),
              { maxLength: 20 },
            ),
          }),
          { maxLength: 4 },
        ),
      }),
      fc.record({
        type: fc.constant('Reserved' as const),
        rid: ridArb,
        tags: fc.array(tagArb),
        pageSize: fc.integer({ min: 1, max: 1 << 16 }),
        dataAddress: fc.constantFrom('h:1', '127.0.0.1:80'),
      }),
      fc.record({
        type: fc.constant('Failed' as const),
        rid: ridArb,
        code: fc.constantFrom('timeout' as const, 'internal' as const),
        message: fc.string({ maxLength: 200 }),
      }),
      fc.record({
        type: fc.constant('KvChunk' as const),
        rid: ridArb,
        seq: fc.nat(),
        tag: tagArb,
        firstSlot: fc.nat(100),
        numSlots: fc.integer({ min: 1, max: 100 }),
        kvDtype: fc.constantFrom('f32' as const, 'f16' as const, 'q8_0' as const),
        checksum: fc.constant(D16),
        payload: fc.uint8Array({ minLength: 1, maxLength: 200 }),
      }),
    );
    fc.assert(
      fc.property(messageArb, (m) => {
        expect(decodeFrame(encodeFrame(m))).toEqual(m);
      }),
      { numRuns: 500 },
    );
  });
});
