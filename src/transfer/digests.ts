// Checksums and digests of the transfer, all xxh64 as 16 lower-case hex digits.
// Owns: how a chunk's checksum, a transfer's digest and a prompt's digest are computed.
// Must never: be used as a security boundary (xxh64 detects corruption, not forgery; channel
// authentication is auth.ts's job).
//
//   chunk checksum  = xxh64(payload, seed = xxh64("rid|seq|page|epoch|firstSlot|numSlots|kvDtype"))
//                     so a payload cannot be replayed under another header unnoticed;
//                     ChunkHasher computes the same value piece by piece as the payload arrives;
//   transfer digest = xxh64 over the chunk checksums, in seq order (what the receiver verified);
//   prompt digest   = xxh64 over the prompt's token ids as little-endian u32.
import { xxh64, Xxh64 } from '@node-rs/xxhash';
import type { KvDtype, RequestId, Tag } from '../core/index.js';

export const DIGEST_PATTERN = /^[0-9a-f]{16}$/;

function hex(value: bigint): string {
  return value.toString(16).padStart(16, '0');
}

export interface ChunkHeader {
  readonly rid: RequestId;
  readonly seq: number;
  readonly tag: Tag;
  readonly firstSlot: number;
  readonly numSlots: number;
  readonly kvDtype: KvDtype;
}

function chunkSeed(header: ChunkHeader): bigint {
  return xxh64(
    `${header.rid}|${header.seq}|${header.tag.page}|${header.tag.epoch}|${header.firstSlot}|${header.numSlots}|${header.kvDtype}`,
  );
}

export function chunkChecksum(header: ChunkHeader, payload: Uint8Array): string {
  return hex(xxh64(payload, chunkSeed(header)));
}

/**
 * A chunk's checksum over a payload fed in pieces (as it comes off the wire): after the
 * pieces of a payload, in order, hex() equals chunkChecksum(header, payload).
 */
export class ChunkHasher {
  readonly #hash: Xxh64;

  constructor(header: ChunkHeader) {
    this.#hash = new Xxh64(chunkSeed(header));
  }

  update(piece: Uint8Array): void {
    this.#hash.update(piece);
  }

  hex(): string {
    return hex(this.#hash.digest());
  }
}

/** The running digest of one transfer, fed with each chunk's checksum in seq order. */
export class TransferDigest {
  readonly #hash = new Xxh64();
  #numChunks = 0;

  add(checksum: string): void {
    this.#hash.update(checksum);
    this.#numChunks++;
  }

  get numChunks(): number {
    return this.#numChunks;
  }

  hex(): string {
    return hex(this.#hash.digest());
  }
}

export function promptDigest(tokens: readonly number[]): string {
  const ids = Uint32Array.from(tokens);
  return hex(xxh64(new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength)));
}
