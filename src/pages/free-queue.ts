// The ledger's free list: a first-in first-out ring of page ids.
// Owns: order only. Must never decide whether a page may be freed (the ledger does that).
//
// Why FIFO and a hand-built ring rather than an array with push/shift: FIFO reuses a freed
// page as late as possible, so a stale tag or a late frame for it is far more likely to meet
// a free page (refused: not-allocated) than a new owner's data; and reuse order is exact and
// predictable in tests. The ring makes both ends O(1) with no garbage.
import { assert, asPageId, type PageId } from '../core/index.js';

export class FreeQueue {
  readonly #ring: Int32Array;
  #head = 0;
  #length = 0;

  /** A queue holding 0, 1, ..., capacity - 1, in that order. */
  constructor(capacity: number) {
    this.#ring = new Int32Array(capacity);
    for (let page = 0; page < capacity; page++) this.#ring[page] = page;
    this.#length = capacity;
  }

  get length(): number {
    return this.#length;
  }

  push(page: PageId): void {
    assert(this.#length < this.#ring.length, () => `free list overflow pushing page ${page}`);
    this.#ring[(this.#head + this.#length) % this.#ring.length] = page;
    this.#length++;
  }

  shift(): PageId {
    assert(this.#length > 0, 'shift from an empty free list');
    const page = this.#ring[this.#head] as number;
    this.#head = (this.#head + 1) % this.#ring.length;
    this.#length--;
    return asPageId(page);
  }

  /** The pages in the order they will be handed out. */
  toArray(): PageId[] {
    const pages: PageId[] = [];
    for (let i = 0; i < this.#length; i++)
      pages.push(asPageId(this.#ring[(this.#head + i) % this.#ring.length] as number));
    return pages;
  }
}
