// PrefixRequester: the requester's side of the prefix lease protocol (prefix-fetch-messages.ts).
// Asks a holder for the pages of a prefix it misses and accepts a page only when every check
// holds; anything else ends the fetch, and the rest is a miss (recomputed), counted, never a read.
//
// Life of a fetch on the requester (H = the holder):
//   1. fetch(): a new fetchId under this requester's epoch, PrefixFetch -> H, a deadline armed
//   2. each PrefixPages: accepted only if its fetchId and epoch name an open fetch to H, its
//      namespace is the one asked, its index is the next one, its path hash is the one asked at
//      that index, its length is one page of this node's pool, and the xxh64 of its bytes matches
//   3. PrefixDone (or the first refused frame, H's close, the deadline) settles the fetch with
//      the pages accepted so far; later frames of a settled fetch are dropped as stale
// Must never: accept a page of another namespace, path, length or checksum, or settle twice.
import { randomInt } from 'node:crypto';
import { xxh64 } from '@node-rs/xxhash';
import type { PeerId } from './machine.js';
import type { Schedule } from './prefix-fetch-holder.js';
import type { PrefixDone, PrefixMessage, PrefixPages } from './prefix-fetch-messages.js';

/** Why a fetch ended before its PrefixDone, or why a frame was dropped ('stale'). */
export type FetchRefusal = 'namespace' | 'path' | 'order' | 'length' | 'checksum' | 'stale' | 'timeout' | 'closed';
export const FETCH_REFUSALS: readonly FetchRefusal[] = [
  'namespace',
  'path',
  'order',
  'length',
  'checksum',
  'stale',
  'timeout',
  'closed',
];

export interface FetchOutcome {
  /** The accepted pages, in order (page i answers pathHashes[i]). */
  readonly pages: readonly Uint8Array[];
  readonly asked: number;
  readonly ended: 'done' | FetchRefusal;
}

export interface RequesterStats {
  fetches: number;
  pagesFetched: number;
  /** Pages asked for and not accepted (the holder lacked them, or the fetch ended first). */
  pagesMissed: number;
  readonly refused: Record<FetchRefusal, number>;
}

export interface PrefixRequesterOptions {
  readonly send: (peer: PeerId, message: PrefixMessage) => void;
  /** One page of this node's pool, all layers: the only length accepted. */
  readonly pageBytes: number;
  readonly schedule: Schedule;
  /** A fetch not done within this is abandoned (the rest recomputed). Default 5 s. */
  readonly timeoutMs?: number;
  /** This process's epoch; default random. */
  readonly epoch?: number;
}

interface OpenFetch {
  readonly holder: PeerId;
  readonly namespace: string;
  readonly pathHashes: readonly string[];
  readonly pages: Uint8Array[];
  readonly settle: (outcome: FetchOutcome) => void;
  readonly cancelTimer: () => void;
}

export class PrefixRequester {
  readonly #o: PrefixRequesterOptions;
  readonly epoch: number;
  readonly #open = new Map<number, OpenFetch>();
  #nextId = 1;
  readonly #stats: RequesterStats = {
    fetches: 0,
    pagesFetched: 0,
    pagesMissed: 0,
    refused: Object.fromEntries(FETCH_REFUSALS.map((r) => [r, 0])) as Record<FetchRefusal, number>,
  };

  constructor(options: PrefixRequesterOptions) {
    this.#o = options;
    this.epoch = options.epoch ?? randomInt(1, 2 ** 31 - 1);
  }

  get numOpen(): number {
    return this.#open.size;
  }

  stats(): RequesterStats {
    return { ...this.#stats, refused: { ...this.#stats.refused } };
  }

  /** Asks holder for the pages at pathHashes (in order) of namespace; resolves with what was accepted. */
  fetch(holder: PeerId, namespace: string, pathHashes: readonly string[]): Promise<FetchOutcome> {
    const fetchId = this.#nextId++;
    this.#stats.fetches++;
    return new Promise<FetchOutcome>((resolve) => {
      const cancelTimer = this.#o.schedule(() => this.#end(fetchId, 'timeout'), this.#o.timeoutMs ?? 5_000);
      this.#open.set(fetchId, { holder, namespace, pathHashes, pages: [], settle: resolve, cancelTimer });
      this.#o.send(holder, { type: 'PrefixFetch', fetchId, epoch: this.epoch, namespace, pathHashes });
    });
  }

  received(from: PeerId, m: PrefixPages | PrefixDone): void {
    const f = this.#open.get(m.fetchId);
    if (f === undefined || m.epoch !== this.epoch || from !== f.holder) {
      this.#stats.refused.stale++;
      return;
    }
    if (m.type === 'PrefixDone') return this.#end(m.fetchId, m.count === f.pages.length ? 'done' : 'order');
    const refusal = this.#check(f, m);
    if (refusal !== undefined) return this.#end(m.fetchId, refusal);
    f.pages.push(m.payload);
  }

  /** The connection to peer closed: its open fetches end with what they have. */
  closed(peer: PeerId): void {
    for (const [fetchId, f] of this.#open) if (f.holder === peer) this.#end(fetchId, 'closed');
  }

  /** Ends every open fetch (the node is closing). */
  close(): void {
    for (const fetchId of [...this.#open.keys()]) this.#end(fetchId, 'closed');
  }

  #check(f: OpenFetch, m: PrefixPages): FetchRefusal | undefined {
    if (m.namespace !== f.namespace) return 'namespace';
    if (m.index !== f.pages.length) return 'order';
    if (m.pathHash !== f.pathHashes[m.index]) return 'path';
    if (m.payload.length !== this.#o.pageBytes) return 'length';
    if (xxh64(m.payload).toString(16).padStart(16, '0') !== m.xxh64) return 'checksum';
    return undefined;
  }

  #end(fetchId: number, ended: FetchOutcome['ended']): void {
    const f = this.#open.get(fetchId);
    if (f === undefined) return;
    this.#open.delete(fetchId);
    f.cancelTimer();
    if (ended !== 'done') this.#stats.refused[ended]++;
    this.#stats.pagesFetched += f.pages.length;
    this.#stats.pagesMissed += f.pathHashes.length - f.pages.length;
    f.settle({ pages: f.pages, asked: f.pathHashes.length, ended });
  }
}
