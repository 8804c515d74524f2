// The wire format of the cluster protocol: length-prefixed binary frames.
// Owns: encoding every Message (and the two handshake frames of auth.ts), splitting a byte
// stream into frames, and validating every field of every incoming frame.
// Must never: accept a frame larger than maxFrameBytes (checked from its length prefix, before
// buffering it), return a message with a field out of range, or throw anything but CodecError
// for any input bytes.
//
//   offset  size  field
//   0       4     frameLength  u32 BE: bytes after this field = 6 + headerLength + payload
//   4       1     version      CODEC_VERSION (2)
//   5       1     kind         1..12 a Message type (MESSAGE_TYPES order), 32..34 a prefix-store message
//                              (PREFIX_MESSAGE_TYPES order, prefix-fetch-messages.ts), 64 Hello, 65 Proof
//   6       4     headerLength u32 BE
//   10      h     header       UTF-8 JSON: the message's fields except `type` and `payload`
//   10+h    n     payload      raw bytes, KvChunk and PrefixPages only (n >= 1); no base64, no copy on send
import { Buffer } from 'node:buffer';
import {
  KV_DTYPES,
  MAX_SCHEMA_CHARS,
  MAX_TOP_LOGPROBS,
  REQUEST_LIMITS,
  type ConstraintSpec,
  type RequestId,
  type SamplingParams,
  type Tag,
  type TenantId,
  type TokenLogprob,
} from '../core/index.js';
import {
  ADDRESS_PATTERN,
  array,
  bool,
  CodecError,
  errorCode,
  finite,
  HEX16,
  HEX64,
  int,
  nullable,
  object,
  objectWithOptional,
  oneOf,
  RID_PATTERN,
  str,
  tagged,
  TENANT_PATTERN,
  U31,
  type Check,
} from './codec-fields.js';
import type { KvChunk, Message, MessageType } from './messages.js';
import { MAX_FETCH_PAGES, type PrefixMessage, type PrefixMessageType } from './prefix-fetch-messages.js';

// 2: KvChunk carries kvDtype (f32 | f16 | q8_0: any of KV_DTYPES), also in its checksum seed. A node of
// version 1 is refused at its Hello. q8_0 came without a bump: a node that predates it cannot store
// q8_0 itself, and it refuses such a KvChunk as malformed (a CodecError: the transfer fails closed).
// A q8_0 payload is the pool's own rows (pages/kv-layout.ts), scales and int8 as stored.
export const CODEC_VERSION = 2;
export const HEAD_BYTES = 10;
/** Default limit: a KvChunk carries one page's slot range (a few MiB for real models); a Prefill 1M tokens of JSON. */
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;

export const MESSAGE_TYPES = [
  'Reserve',
  'Reserved',
  'Rejected',
  'Prefill',
  'KvChunk',
  'KvDone',
  'Ack',
  'Tokens',
  'Finished',
  'Failed',
  'Abort',
  'AbortAck',
] as const satisfies readonly MessageType[];
/** The kind byte of a KvChunk frame (frame-stream.ts streams their payloads). */
export const KV_CHUNK_KIND = MESSAGE_TYPES.indexOf('KvChunk') + 1;
/** The prefix store's messages (prefix-fetch-messages.ts): kinds PREFIX_KIND_BASE + index. */
export const PREFIX_MESSAGE_TYPES = [
  'PrefixFetch',
  'PrefixPages',
  'PrefixDone',
] as const satisfies readonly PrefixMessageType[];
const PREFIX_KIND_BASE = 32;
const KIND_HELLO = 64;
const KIND_PROOF = 65;

/** The handshake frames (auth.ts): who I am and my nonce; my proof that I hold the cluster secret. */
export interface Hello {
  readonly nodeId: string;
  readonly nonce: string;
}
export interface Proof {
  readonly mac: string;
}

export type Frame =
  | { readonly kind: 'message'; readonly message: Message }
  | { readonly kind: 'prefix'; readonly message: PrefixMessage }
  | { readonly kind: 'hello'; readonly hello: Hello }
  | { readonly kind: 'proof'; readonly proof: Proof };

const MAX_ITEMS = 1 << 24;
const rid = str(128, RID_PATTERN, 1) as Check<RequestId>;
const tenant = str(REQUEST_LIMITS.maxTenantChars, TENANT_PATTERN, 1) as Check<TenantId>;
const address = str(255, ADDRESS_PATTERN, 1);
const digest = str(16, HEX16, 16);
const count = int(0, U31);
const tokenId = int(0, U31);
const tag = object({ page: int(0, U31), epoch: int(1, Number.MAX_SAFE_INTEGER) }) as Check<Tag>;
const tags = array(tag, MAX_ITEMS);
const message = str(4096);
/** A LoRA adapter as requests name it (src/cli's --lora names) and its digest (32 hex digits). */
const adapterDigest = str(32, /^[0-9a-f]{32}$/, 32);
const adapter = object({ name: str(64, /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 1), digest: adapterDigest });
/** Structured output (sampling.constraint, optional): what the sampling node builds its matcher from. */
const constraint = tagged<ConstraintSpec>({
  json_object: object({ kind: oneOf(['json_object'] as const) }),
  json_schema: object({ kind: oneOf(['json_schema'] as const), schema: str(MAX_SCHEMA_CHARS, undefined, 1) }),
});
const sampling: Check<SamplingParams> = objectWithOptional<SamplingParams>(
  {
    maxTokens: int(1, U31),
    temperature: finite(0, 1e6),
    topP: finite(Number.MIN_VALUE, 1),
    topK: int(0, REQUEST_LIMITS.maxTopK),
    seed: int(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER),
    stop: array(str(REQUEST_LIMITS.maxStopChars), REQUEST_LIMITS.maxStopStrings),
    stopTokenIds: array(int(0, REQUEST_LIMITS.maxTokenId), REQUEST_LIMITS.maxStopTokenIds),
    ignoreEos: bool,
    presencePenalty: finite(-2, 2),
    frequencyPenalty: finite(-2, 2),
    logprobs: nullable(int(0, MAX_TOP_LOGPROBS)),
  },
  { constraint, promptLogprobs: int(0, MAX_TOP_LOGPROBS) },
);
/** A log-probability as the sampler reports it: in [MIN_LOGPROB, 0] (src/engine's floor, -9999). */
const logprob = finite(-9999, 0);
const tokenLogprob: Check<TokenLogprob> = objectWithOptional<TokenLogprob>(
  { logprob, top: array(object({ id: tokenId, logprob }), MAX_TOP_LOGPROBS) },
  { promptRank: int(1, U31) },
);
const tokenLogprobs = array(tokenLogprob, MAX_ITEMS);

type Fields<T extends Message> = Omit<T, 'type' | 'payload'>;
type Schemas = { readonly [K in MessageType]: Check<Fields<Extract<Message, { type: K }>>> };

const SCHEMAS: Schemas = {
  Reserve: objectWithOptional(
    { rid, tenant, promptTokens: int(1, U31), promptDigest: digest, sampling, prefillAddress: address },
    { adapter },
  ),
  Reserved: object({ rid, tags, pageSize: int(1, 1 << 16), dataAddress: address }),
  Rejected: object({ rid, code: errorCode, message }),
  Prefill: objectWithOptional(
    {
      rid,
      tenant,
      tokens: array(tokenId, MAX_ITEMS),
      sampling,
      decodeAddress: address,
      tags,
      pageSize: int(1, 1 << 16),
    },
    { prefixHolder: address, adapter },
  ),
  KvChunk: object({
    rid,
    seq: count,
    tag,
    firstSlot: int(0, 1 << 16),
    numSlots: int(1, 1 << 16),
    kvDtype: oneOf(KV_DTYPES),
    checksum: digest,
  }),
  KvDone: objectWithOptional(
    {
      rid,
      numChunks: count,
      tokensCovered: count,
      digest,
      promptDigest: digest,
      model: digest,
      firstToken: tokenId,
      firstLogprobs: array(tokenLogprob, 1),
    },
    { cachedTokens: count, promptLogprobs: tokenLogprobs, adapter: adapterDigest },
  ),
  Ack: object({ rid }),
  Tokens: objectWithOptional(
    { rid, offset: count, ids: array(tokenId, MAX_ITEMS), logprobs: tokenLogprobs },
    { promptLogprobs: tokenLogprobs },
  ),
  Finished: objectWithOptional(
    { rid, finishReason: oneOf(['stop', 'length'] as const), promptTokens: count, completionTokens: count },
    { cachedTokens: count },
  ),
  Failed: object({ rid, code: errorCode, message }),
  Abort: object({
    rid,
    reason: oneOf(['client-disconnect', 'router', 'prefill-failed', 'decode-failed', 'timeout', 'shutdown'] as const),
  }),
  AbortAck: object({ rid }),
};
const fetchId = int(0, U31);
const fetchEpoch = int(1, U31);
const namespace = str(1024, undefined, 1);
const pathHash = str(64, HEX64, 64);
type PrefixFields<T extends PrefixMessage> = Omit<T, 'type' | 'payload'>;
const PREFIX_SCHEMAS: { readonly [K in PrefixMessageType]: Check<PrefixFields<Extract<PrefixMessage, { type: K }>>> } =
  {
    PrefixFetch: object({ fetchId, epoch: fetchEpoch, namespace, pathHashes: array(pathHash, MAX_FETCH_PAGES) }),
    PrefixPages: object({ fetchId, epoch: fetchEpoch, namespace, index: count, pathHash, xxh64: digest }),
    PrefixDone: object({ fetchId, epoch: fetchEpoch, count }),
  };
const HELLO = object<Hello>({ nodeId: address, nonce: str(64, HEX64, 64) });
const PROOF = object<Proof>({ mac: str(64, HEX64, 64) });

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

function head(kind: number, header: Uint8Array, payloadBytes: number): Uint8Array {
  const out = new Uint8Array(HEAD_BYTES + header.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, 6 + header.length + payloadBytes);
  out[4] = CODEC_VERSION;
  out[5] = kind;
  view.setUint32(6, header.length);
  out.set(header, HEAD_BYTES);
  return out;
}

/** The frame as parts to write in order: [head+header] or [head+header, payload] (the payload is not copied). */
export function encodeFrameParts(m: Message | PrefixMessage): Uint8Array[] {
  const { type, ...fields } = m;
  const prefixIndex = (PREFIX_MESSAGE_TYPES as readonly string[]).indexOf(type);
  const kind = prefixIndex >= 0 ? PREFIX_KIND_BASE + prefixIndex : MESSAGE_TYPES.indexOf(type as MessageType) + 1;
  if (m.type === 'KvChunk' || m.type === 'PrefixPages') {
    const { payload, ...rest } = fields as Omit<typeof m, 'type'>;
    return [head(kind, utf8.encode(JSON.stringify(rest)), payload.length), payload];
  }
  return [head(kind, utf8.encode(JSON.stringify(fields)), 0)];
}

export function encodeFrame(m: Message | PrefixMessage): Uint8Array {
  const parts = encodeFrameParts(m);
  if (parts.length === 1) return parts[0] as Uint8Array;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function encodeHandshake(frame: { readonly hello: Hello } | { readonly proof: Proof }): Uint8Array {
  return 'hello' in frame
    ? head(KIND_HELLO, utf8.encode(JSON.stringify(frame.hello)), 0)
    : head(KIND_PROOF, utf8.encode(JSON.stringify(frame.proof)), 0);
}

/**
 * One complete frame (length prefix included) -> its validated content. Throws CodecError only.
 * A KvChunk's payload is a view into `bytes`: pass a buffer the message may keep (FrameReader's are).
 */
export function decodeAnyFrame(bytes: Uint8Array, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES): Frame {
  if (!(bytes instanceof Uint8Array)) throw new CodecError('not bytes');
  if (bytes.length < HEAD_BYTES)
    throw new CodecError(`${bytes.length} bytes is shorter than a frame head (${HEAD_BYTES})`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const frameLength = view.getUint32(0);
  if (frameLength + 4 > maxFrameBytes)
    throw new CodecError(`frame of ${frameLength + 4} bytes exceeds the limit of ${maxFrameBytes}`);
  if (frameLength + 4 !== bytes.length)
    throw new CodecError(`length prefix says ${frameLength + 4} bytes, the frame has ${bytes.length}`);
  if (bytes[4] !== CODEC_VERSION) throw new CodecError(`version ${bytes[4]}, this node speaks ${CODEC_VERSION}`);
  const kind = bytes[5] as number;
  const headerLength = view.getUint32(6);
  if (headerLength > bytes.length - HEAD_BYTES)
    throw new CodecError(`header of ${headerLength} bytes overruns the frame`);
  const payload = bytes.subarray(HEAD_BYTES + headerLength);
  const header = parseHeader(bytes.subarray(HEAD_BYTES, HEAD_BYTES + headerLength));
  if (kind === KIND_HELLO || kind === KIND_PROOF) {
    if (payload.length > 0) throw new CodecError('a handshake frame carries no payload');
    return kind === KIND_HELLO
      ? { kind: 'hello', hello: HELLO(header, 'Hello') }
      : { kind: 'proof', proof: PROOF(header, 'Proof') };
  }
  const prefixType = PREFIX_MESSAGE_TYPES[kind - PREFIX_KIND_BASE];
  if (prefixType !== undefined) {
    const fields = PREFIX_SCHEMAS[prefixType](header, prefixType) as Record<string, unknown>;
    if (prefixType === 'PrefixPages') {
      if (payload.length === 0) throw new CodecError('PrefixPages without payload');
      return { kind: 'prefix', message: { type: prefixType, ...fields, payload } as PrefixMessage };
    }
    if (payload.length > 0) throw new CodecError(`${prefixType} carries ${payload.length} payload bytes`);
    return { kind: 'prefix', message: { type: prefixType, ...fields } as PrefixMessage };
  }
  const type = MESSAGE_TYPES[kind - 1];
  if (type === undefined) throw new CodecError(`unknown frame kind ${kind}`);
  const fields = SCHEMAS[type](header, type) as Record<string, unknown>;
  if (type === 'KvChunk') {
    if (payload.length === 0) throw new CodecError('KvChunk without payload');
    return { kind: 'message', message: { type, ...fields, payload } as Message };
  }
  if (payload.length > 0)
    throw new CodecError(`${type} carries ${payload.length} payload bytes; only KvChunk has a payload`);
  return { kind: 'message', message: { type, ...fields } as Message };
}

/** One complete frame after the handshake -> a transfer or prefix-store message; a handshake frame is a protocol error. */
export function decodeClusterFrame(
  bytes: Uint8Array,
  maxFrameBytes = DEFAULT_MAX_FRAME_BYTES,
): Frame & { kind: 'message' | 'prefix' } {
  const frame = decodeAnyFrame(bytes, maxFrameBytes);
  if (frame.kind !== 'message' && frame.kind !== 'prefix')
    throw new CodecError(`unexpected ${frame.kind} frame after the handshake`);
  return frame;
}

/** One complete message frame -> the Message. A handshake frame here is a protocol error. */
export function decodeFrame(bytes: Uint8Array, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES): Message {
  const frame = decodeAnyFrame(bytes, maxFrameBytes);
  if (frame.kind !== 'message') throw new CodecError(`unexpected ${frame.kind} frame after the handshake`);
  return frame.message;
}

/**
 * A KvChunk's fields from its header bytes alone, validated exactly as decodeAnyFrame validates
 * them (for a receiver that takes the payload as it arrives). Throws CodecError only.
 */
export function decodeChunkHeader(header: Uint8Array): Omit<KvChunk, 'type' | 'payload'> {
  return SCHEMAS.KvChunk(parseHeader(header), 'KvChunk');
}

/**
 * The rid of a Reserve frame that failed validation, when its header still names one: such a
 * frame breaks one request's rules (a field out of range), not the connection's, so the receiver
 * answers Rejected for that rid and keeps the connection that other requests share. Any other
 * malformed frame (and a Prefill, whose fields decode already checked in its Reserve) gives
 * undefined: the connection closes.
 */
export function refusableRequest(bytes: Uint8Array): RequestId | undefined {
  if (bytes.length < HEAD_BYTES || bytes[4] !== CODEC_VERSION || bytes[5] !== MESSAGE_TYPES.indexOf('Reserve') + 1)
    return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = view.getUint32(6);
  if (view.getUint32(0) + 4 !== bytes.length || headerLength !== bytes.length - HEAD_BYTES) return undefined;
  try {
    const header = parseHeader(bytes.subarray(HEAD_BYTES));
    if (typeof header !== 'object' || header === null || Array.isArray(header)) return undefined;
    return rid((header as Record<string, unknown>)['rid'], 'Reserve.rid');
  } catch {
    return undefined;
  }
}

function parseHeader(bytes: Uint8Array): unknown {
  let text: string;
  let value: unknown;
  try {
    text = utf8Strict.decode(bytes);
    value = JSON.parse(text);
  } catch (error) {
    throw new CodecError(
      `header is not UTF-8 JSON (${error instanceof Error ? error.message.slice(0, 80) : 'unparseable'})`,
      error,
    );
  }
  return value;
}

/**
 * Splits a byte stream into frames. push() returns the complete frames so far (each a copy that
 * owns its bytes) and throws CodecError as soon as a length prefix exceeds the limit, before
 * buffering that frame.
 * Each frame is copied into its own buffer as its bytes arrive (while they are still in the
 * cache), not gathered once it is complete: one copy per byte either way, but a cheaper one, and
 * the buffer is not zeroed first (every byte of it is written before it is handed out).
 */
export class FrameReader {
  readonly #maxFrameBytes: number;
  readonly #prefix = new Uint8Array(4);
  #prefixHave = 0;
  /** The frame being filled (length prefix included), once its prefix is known. */
  #frame: Uint8Array | undefined;
  #frameHave = 0;

  constructor(maxFrameBytes = DEFAULT_MAX_FRAME_BYTES) {
    this.#maxFrameBytes = maxFrameBytes;
  }

  get bufferedBytes(): number {
    return this.#frame === undefined ? this.#prefixHave : this.#frameHave;
  }

  push(chunk: Uint8Array): Uint8Array[] {
    const frames: Uint8Array[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.#frame === undefined) {
        const take = Math.min(4 - this.#prefixHave, chunk.length - at);
        this.#prefix.set(chunk.subarray(at, at + take), this.#prefixHave);
        this.#prefixHave += take;
        at += take;
        if (this.#prefixHave < 4) break;
        this.#frame = this.#start();
        this.#frameHave = 4;
      }
      const frame = this.#frame;
      const take = Math.min(frame.length - this.#frameHave, chunk.length - at);
      frame.set(chunk.subarray(at, at + take), this.#frameHave);
      this.#frameHave += take;
      at += take;
      if (this.#frameHave === frame.length) {
        frames.push(frame);
        this.#frame = undefined;
        this.#prefixHave = 0;
      }
    }
    return frames;
  }

  /** The prefix is complete: check it, then a buffer for the whole frame with the prefix in it. */
  #start(): Uint8Array {
    const p = this.#prefix;
    const total =
      (((p[0] as number) << 24) >>> 0) + ((p[1] as number) << 16) + ((p[2] as number) << 8) + (p[3] as number) + 4;
    if (total > this.#maxFrameBytes)
      throw new CodecError(`frame of ${total} bytes exceeds the limit of ${this.#maxFrameBytes}`);
    if (total < HEAD_BYTES) throw new CodecError(`length prefix ${total - 4} is shorter than a frame head`);
    const frame = allocUninitialized(total);
    frame.set(p, 0);
    return frame;
  }
}

/** A buffer of its own (never a slice of a shared pool), not zeroed: the caller writes every byte. */
function allocUninitialized(numBytes: number): Uint8Array {
  const b = Buffer.allocUnsafeSlow(numBytes);
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}
