// KvChunks landing in decode pages as their payloads arrive. LandingChunk: one frame, where it
// goes (fixed by the header checks), how far it has come, the running checksum of what came.
// ChunkIntake: the frame each peer is in the middle of sending (one at a time per connection).
// Owns: writing each piece at its payload offset (pages' scatterSlotsPiece), hashing it, and
// stopping for good when a piece may no longer land (its request left AwaitingKv/Receiving, or
// its page left the request).
// Must never: exist for a frame that has not passed the header checks (decode-checks.ts 1-5:
// the machine makes one only from a 'write' verdict), write outside the frame's slot range,
// write a piece into a page the ledger no longer holds for the request in the frame's epoch
// (checked before every piece; only skip-tag-check, which already let the tag through, skips
// it), or stamp before the whole payload has come and its checksum verified (check 6): until
// then the slots it writes stay unstamped, so unreadable.
import { assert, isPageCheckError, type FaultSet, type Tag, type TransferError } from '../core/index.js';
import type { PagePool } from '../pages/index.js';
import { checkChecksum, mayStamp } from './decode-checks.js';
import type { Active } from './decode-types.js';
import { ChunkHasher } from './digests.js';
import type { PeerId } from './machine.js';
import type { Tracer } from './trace.js';
import type { KvChunkHead } from './messages.js';

export class LandingChunk {
  readonly request: Active;
  readonly head: KvChunkHead;
  /** Index of the page in the request's page table; -1 only when skip-tag-check let a foreign tag through. */
  readonly index: number;
  /** Undefined under skip-checksum (the negative control: nothing to verify). */
  readonly #hasher: ChunkHasher | undefined;
  readonly #recheckTag: boolean;
  #landedBytes = 0;
  #stopped: string | undefined;

  constructor(request: Active, head: KvChunkHead, index: number, faults: FaultSet) {
    this.request = request;
    this.head = head;
    this.index = index;
    this.#hasher = faults.has('skip-checksum') ? undefined : new ChunkHasher(head);
    this.#recheckTag = !faults.has('skip-tag-check');
  }

  /** Why the rest of the payload was discarded (the frame is then dropped at its end), or undefined. */
  get stopped(): string | undefined {
    return this.#stopped;
  }

  /** Discard the rest of the payload: it may no longer land (the request left Receiving, ...). */
  stop(why: string): void {
    this.#stopped ??= why;
  }

  /** The next piece of the payload: into its slots, unless the page is no longer the request's. */
  land(pool: PagePool, piece: Uint8Array): void {
    if (this.#stopped !== undefined) return;
    const { tag, firstSlot, numSlots, payloadBytes } = this.head;
    assert(
      this.#landedBytes + piece.length <= payloadBytes,
      () => `KvChunk piece overruns its payload of ${payloadBytes} bytes: the frame stream broke its contract`,
    );
    if (this.#recheckTag && !isHeldFor(pool, this.request, tag)) {
      try {
        pool.checkWrite(this.request.owner, [tag]); // says why (or lets it through under skip-page-check)
      } catch (error) {
        if (!isPageCheckError(error)) throw error;
        return this.stop(`tag: ${error.message}`);
      }
    }
    this.#hasher?.update(piece);
    pool.scatterSlotsPiece(tag.page, firstSlot, numSlots, this.#landedBytes, piece);
    this.#landedBytes += piece.length;
  }

  /**
   * The frame is over: 'stopped' (the rest was discarded), 'mismatch' (check 6 failed: nothing
   * is stamped, the transfer fails closed), or 'stamped': verified, its slots stamped (traced
   * as the page's write and stamp).
   */
  finish(
    pool: PagePool,
    tracer: Tracer,
  ):
    | { readonly kind: 'stopped'; readonly why: string }
    | { readonly kind: 'mismatch'; readonly error: TransferError }
    | { readonly kind: 'stamped' } {
    if (this.#stopped !== undefined) return { kind: 'stopped', why: this.#stopped };
    const { request: r, head: m } = this;
    assert(
      this.#landedBytes === m.payloadBytes,
      () => `KvChunk ended after ${this.#landedBytes} of ${m.payloadBytes} payload bytes`,
    );
    const error = checkChecksum(r, m, this.#hasher?.hex());
    if (error !== undefined) return { kind: 'mismatch', error };
    tracer.page(r.rid, 'write', [m.tag]);
    if (this.index >= 0 || mayStamp(pool, m.tag, m.firstSlot + m.numSlots)) {
      pool.stamp(m.tag, m.firstSlot + m.numSlots);
      tracer.page(r.rid, 'stamp', [m.tag]);
    }
    return { kind: 'stamped' };
  }
}

/** What checkWrite lets through, without building its error message: asked once per piece. */
function isHeldFor(pool: PagePool, r: Active, tag: Tag): boolean {
  const e = pool.ledger.entry(tag.page);
  return e.state === 'allocated' && e.rid === r.owner.rid && e.tenant === r.owner.tenant && e.epoch === tag.epoch;
}

/**
 * The KvChunk each peer is in the middle of sending: landing (its header passed the checks) or
 * discarded (dropped or failed at its header; its payload is read and thrown away).
 */
export class ChunkIntake {
  readonly #pool: PagePool;
  readonly #isReceiving: (r: Active) => boolean;
  readonly #incoming = new Map<PeerId, LandingChunk | 'discard'>();

  /** isReceiving: whether the request may still be written (it is active, AwaitingKv or Receiving). */
  constructor(pool: PagePool, isReceiving: (r: Active) => boolean) {
    this.#pool = pool;
    this.#isReceiving = isReceiving;
  }

  /** A KvChunk's header arrived from `from`: discarded unless land() follows. */
  begin(from: PeerId): void {
    assert(!this.#incoming.has(from), () => `a KvChunk from ${from} began before its previous one ended`);
    this.#incoming.set(from, 'discard');
  }

  /** Its header passed the checks: its payload lands. */
  land(from: PeerId, chunk: LandingChunk): void {
    this.#incoming.set(from, chunk);
  }

  piece(from: PeerId, piece: Uint8Array): void {
    const chunk = this.#incoming.get(from);
    assert(chunk !== undefined, () => `a KvChunk piece from ${from} without its header`);
    if (chunk === 'discard') return;
    if (!this.#isReceiving(chunk.request)) chunk.stop('state');
    chunk.land(this.#pool, piece);
  }

  /** The frame from `from` is over: the chunk that landed (see its `stopped`), or undefined when it was discarded. */
  end(from: PeerId): LandingChunk | undefined {
    const chunk = this.#incoming.get(from);
    assert(chunk !== undefined, () => `a KvChunk from ${from} ended without its header`);
    this.#incoming.delete(from);
    if (chunk === 'discard') return undefined;
    if (!this.#isReceiving(chunk.request)) chunk.stop('state');
    return chunk;
  }

  /** The connection with `peer` closed: whatever it was sending never ends. */
  forget(peer: PeerId): void {
    this.#incoming.delete(peer);
  }
}
