// FrameStream against its reference, FrameReader + decodeFrame: the same frames, the same
// messages (a KvChunk reassembled from its head and pieces), the same refusals; and no payload
// byte handed on before its frame's header is valid.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { asEpoch, asPageId, asRequestId } from '../core/index.js';
import { isCodecError } from './codec-fields.js';
import { CODEC_VERSION, decodeFrame, encodeFrame, FrameReader, MESSAGE_TYPES } from './codec.js';
import { FrameStream } from './frame-stream.js';
import type { KvChunkHead, Message } from './messages.js';

const rid = asRequestId('r1');
const D16 = '0123456789abcdef';
const chunk = (seq: number, numBytes: number): Message => ({
  type: 'KvChunk',
  rid,
  seq,
  tag: { page: asPageId(seq), epoch: asEpoch(seq + 1) },
  firstSlot: 0,
  numSlots: 1,
  kvDtype: 'f32',
  checksum: D16,
  payload: Uint8Array.from({ length: numBytes }, (_, i) => (i * 7 + seq) & 0xff),
});
const MESSAGES: Message[] = [
  { type: 'Ack', rid },
  chunk(0, 1),
  chunk(1, 300),
  { type: 'Tokens', rid, offset: 3, ids: [9, 8, 7], logprobs: [] },
  chunk(2, 41),
  { type: 'AbortAck', rid },
];

type Event =
  | { readonly kind: 'frame'; readonly message: Message }
  | { readonly kind: 'begin'; readonly head: KvChunkHead }
  | { readonly kind: 'piece'; readonly bytes: Uint8Array }
  | { readonly kind: 'end' };

/** A FrameStream that records what it hands on (pieces copied, as they are only lent). */
function recorder(streamChunks: boolean, maxFrameBytes?: number) {
  const events: Event[] = [];
  const stream = new FrameStream(
    {
      frame: (bytes) => events.push({ kind: 'frame', message: decodeFrame(bytes) }),
      chunkBegin: (head) => events.push({ kind: 'begin', head }),
      chunkPiece: (bytes) => events.push({ kind: 'piece', bytes: bytes.slice() }),
      chunkEnd: () => events.push({ kind: 'end' }),
    },
    maxFrameBytes,
  );
  stream.streamChunks = streamChunks;
  return { stream, events };
}

/** Events -> messages: a KvChunk put back together from its head and pieces. */
function reassemble(events: readonly Event[]): Message[] {
  const out: Message[] = [];
  let head: KvChunkHead | undefined;
  let pieces: Uint8Array[] = [];
  for (const e of events) {
    if (e.kind === 'frame') out.push(e.message);
    else if (e.kind === 'begin') [head, pieces] = [e.head, []];
    else if (e.kind === 'piece') pieces.push(e.bytes);
    else {
      const { payloadBytes, ...fields } = head as KvChunkHead;
      const payload = Buffer.concat(pieces);
      expect(payload.length).toBe(payloadBytes);
      out.push({ ...fields, payload: new Uint8Array(payload) });
      head = undefined;
    }
  }
  return out;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

/** Feeds bytes to a stream cut at the given points. */
function feed(stream: FrameStream, bytes: Uint8Array, cuts: readonly number[]): void {
  const points = [0, ...[...cuts].sort((a, b) => a - b), bytes.length];
  for (let i = 1; i < points.length; i++) stream.push(bytes.subarray(points[i - 1], points[i]));
}

describe('FrameStream: the same frames as FrameReader, KvChunk payloads in pieces', () => {
  const wire = concat(MESSAGES.map(encodeFrame));

  it('hands on every message, cut at any boundaries, with KvChunk payloads as pieces of what was pushed', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: wire.length }), { maxLength: 30 }), (cuts) => {
        const { stream, events } = recorder(true);
        feed(stream, wire, cuts);
        expect(reassemble(events)).toEqual(MESSAGES);
        expect(events.filter((e) => e.kind === 'frame').map((e) => (e.kind === 'frame' ? e.message.type : ''))).toEqual(
          ['Ack', 'Tokens', 'AbortAck'],
        );
        expect(stream.atFrameBoundary).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('splits a KvChunk at every byte boundary into the same head and payload', () => {
    const frame = encodeFrame(MESSAGES[2] as Message);
    for (let cut = 1; cut < frame.length; cut++) {
      const { stream, events } = recorder(true);
      feed(stream, frame, [cut]);
      expect(reassemble(events)).toEqual([MESSAGES[2]]);
      // The header is whole before the first piece: a cut inside the head or header gives one piece.
      const headerEnd = frame.length - 300;
      expect(events.filter((e) => e.kind === 'piece')).toHaveLength(cut > headerEnd ? 2 : 1);
    }
  });

  it('lends pieces as views into the pushed buffer: no copy of the payload', () => {
    const frame = encodeFrame(MESSAGES[2] as Message);
    const seen: Uint8Array[] = [];
    const stream = new FrameStream({
      frame: () => undefined,
      chunkBegin: () => undefined,
      chunkPiece: (bytes) => seen.push(bytes),
      chunkEnd: () => undefined,
    });
    stream.streamChunks = true;
    stream.push(frame);
    expect(seen).toHaveLength(1);
    expect((seen[0] as Uint8Array).buffer).toBe(frame.buffer);
  });

  it('with streaming off, hands on exactly the frames FrameReader splits', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: wire.length }), { maxLength: 10 }), (cuts) => {
        const { stream, events } = recorder(false);
        feed(stream, wire, cuts);
        const reader = new FrameReader();
        const reference: Uint8Array[] = [];
        const points = [0, ...[...cuts].sort((a, b) => a - b), wire.length];
        for (let i = 1; i < points.length; i++) reference.push(...reader.push(wire.subarray(points[i - 1], points[i])));
        expect(events).toEqual(reference.map((f) => ({ kind: 'frame', message: decodeFrame(f) })));
      }),
      { numRuns: 100 },
    );
  });
});

describe("FrameStream: the codec's refusals, before any payload byte", () => {
  it('refuses a frame over the size limit from its length prefix alone', () => {
    const { stream, events } = recorder(true, 1024);
    expect(() => stream.push(new Uint8Array([0, 0, 0x10, 0]))).toThrow(/exceeds the limit of 1024/);
    expect(events).toEqual([]);
  });

  it('refuses a KvChunk without payload, of another version, or whose header overruns the frame', () => {
    const frame = encodeFrame(chunk(0, 4));
    const headerLength = new DataView(frame.buffer).getUint32(6);
    const cases: [Uint8Array, RegExp][] = [];
    const noPayload = frame.slice(0, 10 + headerLength);
    new DataView(noPayload.buffer).setUint32(0, 6 + headerLength);
    cases.push([noPayload, /without payload/]);
    const version = frame.slice();
    version[4] = CODEC_VERSION + 1;
    cases.push([version, new RegExp(`version ${CODEC_VERSION + 1}`)]);
    const overrun = frame.slice();
    new DataView(overrun.buffer).setUint32(6, headerLength + 5);
    cases.push([overrun, /overruns the frame/]);
    for (const [bytes, pattern] of cases) {
      const { stream, events } = recorder(true);
      expect(() => stream.push(bytes)).toThrow(pattern);
      expect(events).toEqual([]);
    }
  });

  it('a KvChunk with any bytes after its length prefix changed: the same message as decodeFrame, or a CodecError before any piece', () => {
    const frames = [chunk(0, 1), chunk(1, 64), { type: 'Ack', rid } as Message].map(encodeFrame);
    fc.assert(
      fc.property(
        fc.nat(frames.length - 1),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }),
        fc.nat(),
        (which, edits, cut) => {
          const frame = (frames[which] as Uint8Array).slice();
          for (const [at, value] of edits) frame[4 + (at % (frame.length - 4))] = value;
          let reference: Message | undefined;
          try {
            reference = decodeFrame(frame);
          } catch (error) {
            if (!isCodecError(error)) throw error;
          }
          const { stream, events } = recorder(true);
          let refused = false;
          try {
            feed(stream, frame, [cut % frame.length]);
          } catch (error) {
            if (!isCodecError(error)) throw error;
            refused = true;
          }
          if (reference === undefined) {
            expect(refused).toBe(true);
            expect(events.filter((e) => e.kind === 'piece' || e.kind === 'end')).toEqual([]);
          } else {
            expect(refused).toBe(false);
            expect(reassemble(events)).toEqual([reference]);
          }
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('random bytes never throw anything but a CodecError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.boolean(), (bytes, streaming) => {
        const { stream } = recorder(streaming, 256);
        try {
          stream.push(bytes);
        } catch (error) {
          if (!isCodecError(error)) throw error;
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('knows the KvChunk kind byte', () => {
    expect(encodeFrame(chunk(0, 1))[5]).toBe(MESSAGE_TYPES.indexOf('KvChunk') + 1);
  });
});
