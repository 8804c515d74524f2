// Tombstones: what a protocol machine remembers of requests that ended, for `tombstoneMs`, so a
// late or repeated message for one is dropped (or answered) instead of starting it again.
// Owns: the map from rid to tombstone and the order in which they expire.
// Must never: make an input's cost grow with how many requests ended recently (STYLE 15). A
// tombstone expires tombstoneMs after it was set, and the machines set them at their input's
// time, which only grows; so the order they were set in is the order they expire in, and
// sweep() pops expired ones from the front of a queue: amortized O(1) per tombstone, and an
// input that finds nothing expired costs one comparison. A tombstone set again (a rid buried
// twice) leaves a stale queue entry, which sweep() recognises by its time and skips. A clock
// that went back (tests) only keeps tombstones a little longer, never forgets one early.
import type { RequestId } from '../core/index.js';

interface Queued {
  readonly rid: RequestId;
  readonly expiresAtMs: number;
}

export class Tombstones<T extends { readonly expiresAtMs: number }> {
  readonly #byRid = new Map<RequestId, T>();
  /** In the order they were set; [head, length) are live entries (or stale ones sweep() skips). */
  #queue: Queued[] = [];
  #head = 0;
  #numExamined = 0;

  get size(): number {
    return this.#byRid.size;
  }

  get(rid: RequestId): T | undefined {
    return this.#byRid.get(rid);
  }

  has(rid: RequestId): boolean {
    return this.#byRid.has(rid);
  }

  set(rid: RequestId, tombstone: T): void {
    this.#byRid.set(rid, tombstone);
    this.#queue.push({ rid, expiresAtMs: tombstone.expiresAtMs });
  }

  /** Forgets every tombstone that expired by nowMs; returns how many were forgotten. */
  sweep(nowMs: number): number {
    let forgotten = 0;
    const q = this.#queue;
    while (this.#head < q.length) {
      const first = q[this.#head] as Queued;
      this.#numExamined++;
      if (first.expiresAtMs > nowMs) break;
      this.#head++;
      const t = this.#byRid.get(first.rid);
      if (t !== undefined && t.expiresAtMs === first.expiresAtMs) {
        this.#byRid.delete(first.rid);
        forgotten++;
      }
    }
    // Drop the swept prefix once it is most of the array (amortized O(1) per entry).
    if (this.#head > 1024 && this.#head * 2 > q.length) {
      this.#queue = q.slice(this.#head);
      this.#head = 0;
    }
    return forgotten;
  }

  /** Queue entries sweep() has looked at, in all (tests: the cost of sweeping). */
  get numExamined(): number {
    return this.#numExamined;
  }

  /** Queue entries kept, stale ones included (tests: the queue does not grow without bound). */
  get queueLength(): number {
    return this.#queue.length - this.#head;
  }
}
