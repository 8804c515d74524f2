// PageLease: a holder's read of cached prefix pages for a peer (the prefix lease protocol,
// transfer/prefix-fetch-holder.ts). Pages found in the pool are pinned by the prefix cache for
// the lease's life, so eviction can neither free nor reuse them while their bytes are read;
// pages found in the disk tier were copied out (after the tier's own checks) when the lease was
// taken. LeaseTable keeps the open leases, each with its peer and deadline.
// Owns: the lease's pages and whether it is open; releasing exactly once.
// Must never: hand out bytes after release, leave a page pinned after release, or read a pool
// page whose tag is no longer the one leased (a read that finds the page changed ends the read:
// a miss, never other bytes). Only the fault `ignore-prefix-lease` takes no pin and skips that
// check (the negative control: a page evicted and reused mid-read is sent).
import { assert, type Tag } from '../core/index.js';

export type LeasedPage =
  | { readonly pathHash: string; readonly source: 'pool'; readonly tag: Tag }
  | { readonly pathHash: string; readonly source: 'disk'; readonly bytes: Uint8Array };

/** What a lease needs from the prefix cache that made it. */
export interface LeaseHost {
  /** The page's current bytes, or undefined when it no longer holds tag's cached data (unchecked: `checked` false). */
  read(tag: Tag, checked: boolean): Uint8Array | undefined;
  unpin(tags: readonly Tag[]): void;
}

export class PageLease {
  readonly pages: readonly LeasedPage[];
  readonly #host: LeaseHost;
  /** False under `ignore-prefix-lease`: nothing was pinned, and reads are not checked. */
  readonly #pinned: boolean;
  #open = true;

  constructor(pages: readonly LeasedPage[], host: LeaseHost, pinned: boolean) {
    this.pages = pages;
    this.#host = host;
    this.#pinned = pinned;
  }

  get open(): boolean {
    return this.#open;
  }

  /** Page i's bytes; undefined when the page changed under the lease (only possible without pins). */
  read(i: number): Uint8Array | undefined {
    assert(this.#open, () => `PageLease: read of page ${i} after release`);
    const page = this.pages[i];
    assert(page !== undefined, () => `PageLease: no page ${i} of ${this.pages.length}`);
    return page.source === 'disk' ? page.bytes : this.#host.read(page.tag, this.#pinned);
  }

  /** Ends the lease: pinned pages become evictable again. Idempotent. */
  release(): void {
    if (!this.#open) return;
    this.#open = false;
    if (this.#pinned) this.#host.unpin(this.pages.flatMap((p) => (p.source === 'pool' ? [p.tag] : [])));
  }
}

interface OpenLease {
  readonly lease: PageLease;
  readonly peer: string;
  readonly deadlineMs: number;
}

/** The open leases of one holder: each ends on done, on its peer's close, or at its deadline. */
export class LeaseTable {
  readonly #open = new Map<number, OpenLease>();
  #nextId = 1;

  get numOpen(): number {
    return this.#open.size;
  }

  /** Files a lease; returns its id. */
  add(lease: PageLease, peer: string, deadlineMs: number): number {
    const id = this.#nextId++;
    this.#open.set(id, { lease, peer, deadlineMs });
    return id;
  }

  /** Releases lease id (done); false when it had already ended. */
  release(id: number): boolean {
    const entry = this.#open.get(id);
    if (entry === undefined) return false;
    this.#open.delete(id);
    entry.lease.release();
    return true;
  }

  /** Releases every lease of peer (its connection closed); returns how many. */
  releasePeer(peer: string): number {
    let n = 0;
    for (const [id, entry] of this.#open) if (entry.peer === peer && this.release(id)) n++;
    return n;
  }

  /** Releases every lease whose deadline is at or before nowMs; returns how many. */
  expire(nowMs: number): number {
    let n = 0;
    for (const [id, entry] of this.#open) if (entry.deadlineMs <= nowMs && this.release(id)) n++;
    return n;
  }

  /** The earliest deadline of an open lease. */
  nextDeadlineMs(): number | undefined {
    let at: number | undefined;
    for (const { deadlineMs } of this.#open.values()) at = at === undefined ? deadlineMs : Math.min(at, deadlineMs);
    return at;
  }

  releaseAll(): void {
    for (const id of [...this.#open.keys()]) this.release(id);
  }
}
