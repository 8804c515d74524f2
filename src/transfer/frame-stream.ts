// Splits a connection's byte stream into frames (codec.ts's format), handing a KvChunk's payload
// on in the pieces it arrived in instead of assembling it: a decode node hashes each piece and
// lands it in its page while it is still in the cache, and no frame-sized buffer is allocated,
// filled and collected per chunk.
// Owns: where each frame starts and ends, the frame size limit, and when a KvChunk's header is
// complete and valid. FrameReader (codec.ts) is its reference: the same frames, the same errors.
// Must never: hand on a payload byte before its frame's header has been validated in full
// (decodeChunkHeader: the codec's strict checks), accept a frame larger than maxFrameBytes
// (checked from its length prefix, before buffering or streaming any of it), hand on more or
// fewer payload bytes than the length prefix says, or throw anything but CodecError for any input.
//
// Per frame, when streamChunks is on (the connection is authenticated and its node takes pieces):
//
//   | length u32 | version | kind | headerLength u32 | header (JSON) | payload ...          |
//   |<------------- collected (10 bytes) ---------->|<- collected ->|<- pieces, as they come ->
//    kind KvChunk: chunkBegin(head) once the header validates, chunkPiece(view) per piece of the
//                  payload in each pushed buffer, chunkEnd() after its last byte
//    any other:    the whole frame is collected, then frame(bytes) (a copy the sink may keep)
//
// A piece is a view into the buffer given to push(): valid only during the call (a TCP pipe
// reuses its read buffer), so a sink that keeps one must copy it.
import { Buffer } from 'node:buffer';
import { CodecError } from './codec-fields.js';
import { CODEC_VERSION, decodeChunkHeader, DEFAULT_MAX_FRAME_BYTES, HEAD_BYTES, KV_CHUNK_KIND } from './codec.js';
import type { KvChunkHead } from './messages.js';

export interface FrameSink {
  /** A complete frame (length prefix included), in a buffer of its own. */
  frame(bytes: Uint8Array): void;
  /** A KvChunk's validated header: exactly payloadBytes bytes of payload follow, then chunkEnd(). */
  chunkBegin(head: KvChunkHead): void;
  /** The next bytes of the payload, in order; a view valid only during this call. */
  chunkPiece(piece: Uint8Array): void;
  chunkEnd(): void;
}

export class FrameStream {
  /** Stream KvChunk payloads (else every frame is collected whole and given to frame()). */
  streamChunks = false;
  readonly #sink: FrameSink;
  #maxFrameBytes: number;
  /** The first HEAD_BYTES bytes of the frame being read. */
  readonly #head = new Uint8Array(HEAD_BYTES);
  #headHave = 0;
  /** The frame's length, prefix included, once the prefix is in (else 0). */
  #total = 0;
  /** A whole frame being collected. */
  #frame: Uint8Array | undefined;
  #frameHave = 0;
  /** A KvChunk's header being collected. */
  #header: Uint8Array | undefined;
  #headerHave = 0;
  /** Payload bytes of the streaming KvChunk still to come. */
  #payloadLeft = 0;

  constructor(sink: FrameSink, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES) {
    this.#sink = sink;
    this.#maxFrameBytes = maxFrameBytes;
  }

  /** The limit for frames whose length prefix is still to come (a connection raises it once the peer authenticated). */
  set maxFrameBytes(numBytes: number) {
    this.#maxFrameBytes = numBytes;
  }

  /** True between frames: nothing of an unfinished frame has been read. */
  get atFrameBoundary(): boolean {
    return this.#headHave === 0;
  }

  /** Consumes bytes, calling the sink for each frame, header, piece and end they complete. Throws CodecError. */
  push(bytes: Uint8Array): void {
    let at = 0;
    while (at < bytes.length) {
      if (this.#payloadLeft > 0) {
        const take = Math.min(this.#payloadLeft, bytes.length - at);
        this.#payloadLeft -= take;
        this.#sink.chunkPiece(bytes.subarray(at, at + take));
        at += take;
        if (this.#payloadLeft === 0) {
          this.#next();
          this.#sink.chunkEnd();
        }
      } else if (this.#frame !== undefined) {
        const frame = this.#frame;
        const take = Math.min(frame.length - this.#frameHave, bytes.length - at);
        frame.set(bytes.subarray(at, at + take), this.#frameHave);
        this.#frameHave += take;
        at += take;
        if (this.#frameHave === frame.length) {
          this.#next();
          this.#sink.frame(frame);
        }
      } else if (this.#header !== undefined) {
        const header = this.#header;
        const take = Math.min(header.length - this.#headerHave, bytes.length - at);
        header.set(bytes.subarray(at, at + take), this.#headerHave);
        this.#headerHave += take;
        at += take;
        if (this.#headerHave === header.length) this.#beginChunk(header);
      } else {
        const want = this.#headHave < 4 ? 4 : HEAD_BYTES;
        const take = Math.min(want - this.#headHave, bytes.length - at);
        this.#head.set(bytes.subarray(at, at + take), this.#headHave);
        this.#headHave += take;
        at += take;
        if (this.#headHave === 4) {
          this.#total = this.#checkPrefix();
          if (!this.streamChunks) this.#started(); // the prefix is all a whole frame needs to start
        } else if (this.#headHave === HEAD_BYTES) {
          this.#started();
        }
      }
    }
  }

  /** The length prefix is in: the frame's whole length, checked before any of it is buffered. */
  #checkPrefix(): number {
    const h = this.#head;
    const total =
      (((h[0] as number) << 24) >>> 0) + ((h[1] as number) << 16) + ((h[2] as number) << 8) + (h[3] as number) + 4;
    if (total > this.#maxFrameBytes)
      throw new CodecError(`frame of ${total} bytes exceeds the limit of ${this.#maxFrameBytes}`);
    if (total < HEAD_BYTES) throw new CodecError(`length prefix ${total - 4} is shorter than a frame head`);
    return total;
  }

  /** The head is in (its prefix only, when not streaming): collect the whole frame, or a KvChunk's header. */
  #started(): void {
    const h = this.#head;
    if (this.#headHave === HEAD_BYTES && h[5] === KV_CHUNK_KIND) {
      if (h[4] !== CODEC_VERSION) throw new CodecError(`version ${h[4]}, this node speaks ${CODEC_VERSION}`);
      const headerLength =
        (((h[6] as number) << 24) >>> 0) + ((h[7] as number) << 16) + ((h[8] as number) << 8) + (h[9] as number);
      if (headerLength > this.#total - HEAD_BYTES)
        throw new CodecError(`header of ${headerLength} bytes overruns the frame`);
      if (headerLength === this.#total - HEAD_BYTES) throw new CodecError('KvChunk without payload');
      this.#header = new Uint8Array(headerLength);
      this.#headerHave = 0;
      if (headerLength === 0) this.#beginChunk(this.#header);
      return;
    }
    const frame = allocUninitialized(this.#total);
    frame.set(h.subarray(0, this.#headHave), 0);
    this.#frame = frame;
    this.#frameHave = this.#headHave;
  }

  #beginChunk(header: Uint8Array): void {
    const payloadBytes = this.#total - HEAD_BYTES - header.length;
    const fields = decodeChunkHeader(header);
    this.#header = undefined;
    this.#payloadLeft = payloadBytes;
    this.#sink.chunkBegin({ type: 'KvChunk', ...fields, payloadBytes });
  }

  /** The frame is over: the next byte is a length prefix. */
  #next(): void {
    this.#headHave = 0;
    this.#total = 0;
    this.#frame = undefined;
    this.#payloadLeft = 0;
  }
}

/** A buffer of its own (never a slice of a shared pool), not zeroed: every byte of it is written before it is handed out. */
function allocUninitialized(numBytes: number): Uint8Array {
  const b = Buffer.allocUnsafeSlow(numBytes);
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}
