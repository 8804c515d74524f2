// PrefixHolder: the holder's side of the prefix lease protocol (prefix-fetch-messages.ts). A peer
// that misses a tenant's prefix sends PrefixFetch; the holder resolves the namespace to one of
// its own (a namespace of another model or KV layout, or one it cannot read, is refused), takes
// a lease on the leading run of asked pages it holds (pages/lease.ts: pool pages pinned, disk
// pages copied out after the tier's checks), streams them one per PrefixPages frame, then
// PrefixDone with the count, and releases the lease.
//
// Life of a fetch on the holder (R = the requester):
//   1. R: PrefixFetch -> source.lease(namespace, pathHashes): refused -> PrefixDone{count 0}
//   2. the lease is filed with R's peer id and a deadline (leaseTimeoutMs)
//   3. page by page: read it under the lease (a page that changed ends the run), checksum it,
//      hand the frame to the transport; past highWaterBytes buffered, wait for the drain
//   4. PrefixDone{count} once the last page is handed to the transport; the lease is released
//   The lease also ends when R's connection closes or at its deadline (whichever comes first):
//   the loop stops at its next page and sends nothing more.
// Must never: send a page it has not leased, keep a lease past done/close/deadline, or look a page
// up without the namespace (only the source's fault `prefix-key-without-tenant` does).
import { xxh64 } from '@node-rs/xxhash';
import { LeaseTable, type PageLease } from '../pages/index.js';
import type { PeerId } from './machine.js';
import type { PrefixFetch, PrefixMessage } from './prefix-fetch-messages.js';

/** What the holder needs of the transport (the node's cluster Transport fits). */
export interface HolderIo {
  send(peer: PeerId, message: PrefixMessage): void;
  bufferedBytes(peer: PeerId): number;
  whenDrained(peer: PeerId): Promise<void>;
}

/** Runs fn once after ms (unref'd: it never keeps the process up); returns its cancel. Timers are the node's, passed in. */
export type Schedule = (fn: () => void, ms: number) => () => void;

/** Where the holder finds pages: a lease on the run, or why the namespace is not served here. */
export type PrefixSource = (namespace: string, pathHashes: readonly string[]) => PageLease | 'namespace';

export interface HolderStats {
  /** PrefixFetch messages answered. */
  fetches: number;
  /** Pages sent. */
  pagesServed: number;
  /** Pages asked for that this node did not hold (or stopped serving: a changed page, a closed lease). */
  pagesMissed: number;
  /** Fetches refused whole: a namespace that is not one of this node's. */
  refusedNamespace: number;
  /** Reads that found their page changed under the lease (only without pins: the fault). */
  pagesChanged: number;
  /** Leases ended by their deadline, and by their peer's close. */
  leasesExpired: number;
  leasesClosed: number;
}

export interface PrefixHolderOptions {
  readonly io: HolderIo;
  readonly source: PrefixSource;
  readonly schedule: Schedule;
  /** A lease ends at most this long after it was taken. Default 10 s. */
  readonly leaseTimeoutMs?: number;
  /** Bytes buffered on R's connection beyond which the holder waits for the drain. Default 4 MiB. */
  readonly highWaterBytes?: number;
  readonly now?: () => number;
}

export class PrefixHolder {
  readonly #io: HolderIo;
  readonly #source: PrefixSource;
  readonly #leaseTimeoutMs: number;
  readonly #highWaterBytes: number;
  readonly #now: () => number;
  readonly #schedule: Schedule;
  readonly #leases = new LeaseTable();
  #cancelTimer: (() => void) | undefined;
  #closed = false;
  readonly #stats: HolderStats = {
    fetches: 0,
    pagesServed: 0,
    pagesMissed: 0,
    refusedNamespace: 0,
    pagesChanged: 0,
    leasesExpired: 0,
    leasesClosed: 0,
  };

  constructor(options: PrefixHolderOptions) {
    this.#io = options.io;
    this.#source = options.source;
    this.#leaseTimeoutMs = options.leaseTimeoutMs ?? 10_000;
    this.#highWaterBytes = options.highWaterBytes ?? 4 * 1024 * 1024;
    this.#now = options.now ?? Date.now;
    this.#schedule = options.schedule;
  }

  get numOpenLeases(): number {
    return this.#leases.numOpen;
  }

  stats(): HolderStats {
    return { ...this.#stats };
  }

  received(from: PeerId, m: PrefixFetch): void {
    if (this.#closed) return;
    this.#stats.fetches++;
    const lease = this.#source(m.namespace, m.pathHashes);
    if (lease === 'namespace') {
      this.#stats.refusedNamespace++;
      this.#stats.pagesMissed += m.pathHashes.length;
      this.#io.send(from, { type: 'PrefixDone', fetchId: m.fetchId, epoch: m.epoch, count: 0 });
      return;
    }
    const id = this.#leases.add(lease, from, this.#now() + this.#leaseTimeoutMs);
    this.#arm();
    void this.#serve(from, m, lease, id);
  }

  /** R's connection closed: its leases end now. */
  closed(peer: PeerId): void {
    this.#stats.leasesClosed += this.#leases.releasePeer(peer);
  }

  /** Ends every lease (the node is closing). */
  close(): void {
    this.#closed = true;
    this.#leases.releaseAll();
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
  }

  async #serve(from: PeerId, m: PrefixFetch, lease: PageLease, id: number): Promise<void> {
    const { fetchId, epoch, namespace } = m;
    let count = 0;
    try {
      for (let i = 0; i < lease.pages.length && lease.open; i++) {
        const bytes = lease.read(i);
        if (bytes === undefined) {
          this.#stats.pagesChanged++;
          break;
        }
        const pathHash = (lease.pages[i] as PageLease['pages'][number]).pathHash;
        const checksum = xxh64(bytes).toString(16).padStart(16, '0');
        this.#io.send(from, {
          type: 'PrefixPages',
          fetchId,
          epoch,
          namespace,
          index: i,
          pathHash,
          xxh64: checksum,
          payload: bytes,
        });
        count++;
        if (this.#io.bufferedBytes(from) > this.#highWaterBytes) await this.#io.whenDrained(from);
      }
      if (lease.open) this.#io.send(from, { type: 'PrefixDone', fetchId, epoch, count });
    } finally {
      this.#leases.release(id);
      this.#stats.pagesServed += count;
      this.#stats.pagesMissed += m.pathHashes.length - count;
    }
  }

  /** One timer, at the earliest lease deadline. */
  #arm(): void {
    if (this.#cancelTimer !== undefined || this.#closed) return;
    const at = this.#leases.nextDeadlineMs();
    if (at === undefined) return;
    this.#cancelTimer = this.#schedule(
      () => {
        this.#cancelTimer = undefined;
        this.#stats.leasesExpired += this.#leases.expire(this.#now());
        this.#arm();
      },
      Math.max(0, at - this.#now()),
    );
  }
}
