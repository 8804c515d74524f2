// PagePool: the data plane beside the ledger — the KV storage, the stamps, and the checks
// every reader and writer passes before touching a request's pages.
// Owns: the PagedKvView, one stamp per page, checkRead/checkWrite, gather/scatter.
// Must never: change page ownership (only the ledger does), keep stamps in the ledger (a stamp
// is evidence written by whoever filled the page, independent of the ledger's bookkeeping),
// or let a failed check read or write anything.
//
// Stamps: per page, the epoch of the writer and the number of slots filled contiguously from
// slot 0 in that epoch. A page allocated in epoch e but never written still carries the stamp
// of its previous life (epoch < e) — the incident's stale page — and checkRead refuses it.
//
// How a step uses this: before a forward step, the worker runs checkRead(reader, pageTable,
// startPos) for the context already in the pages and checkWrite(writer, pages of the new
// positions); the kernels then write the new K/V before attention reads them; after the step
// it stamps the pages it filled. The fault `skip-page-check` turns checkRead/checkWrite into
// no-ops: the negative control, never on in production.
//
// Lending (the engine thread): while a step is in flight its page tables' pages are lent to the
// thread that runs the forward pass (lend/unlend, by the runner). Ledger and stamps never leave
// the main thread; page data written by anyone else (scatterSlots*: a landing) into a lent page
// is refused with an InvariantError before any byte moves. `skip-lend-check` lets it through.
import {
  InvariantError,
  assert,
  asEpoch,
  NO_FAULTS,
  PageCheckError,
  type Epoch,
  type FaultSet,
  type PageCheckFailure,
  type PageId,
  type Tag,
} from '../core/index.js';
import { pagesFor } from './arithmetic.js';
import {
  createKvView,
  gatherSlots,
  scatterSlots,
  scatterSlotsPiece,
  slotRangeBytes,
  type KvShape,
  type PagedKvView,
} from './kv-layout.js';
import { PageLedger } from './ledger.js';
import { describeEntry, type Owner } from './page-entry.js';
import { ownershipFailure, type Access } from './page-checks.js';

export interface Stamp {
  readonly epoch: Epoch;
  readonly filledSlots: number;
}

export interface PagePoolOptions {
  readonly kv: PagedKvView;
  /** Defaults to a fresh ledger with kv.numPages pages. */
  readonly ledger?: PageLedger;
  readonly faults?: FaultSet;
}

export class PagePool {
  readonly ledger: PageLedger;
  readonly kv: PagedKvView;
  readonly pageSize: number;
  /** Float64, not Uint32: epochs are exact to 2^53 and a 32-bit stamp could wrap onto a live epoch. */
  readonly #stampEpoch: Float64Array;
  readonly #stampFilled: Uint32Array;
  readonly #skipChecks: boolean;
  /** Per page: how many page tables of the step in flight hold it (a cached prefix page may be in several). */
  readonly #lent: Uint16Array;
  readonly #skipLendCheck: boolean;
  #numCheckFailures = 0;

  /** A pool with zeroed storage of the given shape and a fresh ledger. */
  static create(shape: KvShape, faults: FaultSet = NO_FAULTS): PagePool {
    return new PagePool({ kv: createKvView(shape), faults });
  }

  constructor(options: PagePoolOptions) {
    this.kv = createKvView(options.kv, options.kv.data);
    this.ledger = options.ledger ?? new PageLedger(this.kv.numPages);
    assert(
      this.ledger.numPages === this.kv.numPages,
      () => `ledger has ${this.ledger.numPages} pages, KV storage ${this.kv.numPages}`,
    );
    this.pageSize = this.kv.pageSize;
    this.#stampEpoch = new Float64Array(this.kv.numPages);
    this.#stampFilled = new Uint32Array(this.kv.numPages);
    this.#skipChecks = (options.faults ?? NO_FAULTS).has('skip-page-check');
    this.#lent = new Uint16Array(this.kv.numPages);
    this.#skipLendCheck = (options.faults ?? NO_FAULTS).has('skip-lend-check');
  }

  /** The step in flight reads and writes these pages (on another thread) until unlend(). */
  lend(pages: ArrayLike<number>): void {
    for (let i = 0; i < pages.length; i++) (this.#lent[pages[i] as number] as number)++;
  }

  unlend(pages: ArrayLike<number>): void {
    for (let i = 0; i < pages.length; i++) {
      const page = pages[i] as number;
      assert((this.#lent[page] as number) > 0, () => `page ${page} is given back but was not lent`);
      (this.#lent[page] as number)--;
    }
  }

  isLent(page: PageId): boolean {
    return this.#lent[page] !== 0;
  }

  #refuseLent(page: PageId): void {
    if (this.#lent[page] !== 0 && !this.#skipLendCheck) {
      throw new InvariantError(
        `page ${page} is lent to the step in flight: nothing else may write it until the step returns`,
      );
    }
  }

  /** Page checks that failed (each threw PageCheckError): the tag-mismatch counter's source. */
  get numCheckFailures(): number {
    return this.#numCheckFailures;
  }

  /**
   * Records that slots [0, filledSlots) of tag's page hold data written in tag's epoch.
   * Only the current allocation may stamp, and within one epoch a stamp never shrinks.
   */
  stamp(tag: Tag, filledSlots: number): void {
    const e = this.ledger.entry(tag.page);
    assert(
      e.state === 'allocated' && e.epoch === tag.epoch,
      () =>
        `stamp: page ${tag.page} is ${describeEntry(e)}, not allocated in epoch ${tag.epoch}; writers pass checkWrite first`,
    );
    assert(
      Number.isInteger(filledSlots) && filledSlots >= 0 && filledSlots <= this.pageSize,
      () => `stamp: ${filledSlots} filled slots on a page of ${this.pageSize}`,
    );
    const current = this.#stampEpoch[tag.page] === tag.epoch ? (this.#stampFilled[tag.page] as number) : 0;
    assert(
      filledSlots >= current,
      () => `stamp: page ${tag.page} would shrink from ${current} to ${filledSlots} filled slots in epoch ${tag.epoch}`,
    );
    this.#stampEpoch[tag.page] = tag.epoch;
    this.#stampFilled[tag.page] = filledSlots;
  }

  /**
   * Speculative decoding's rollback: a verification step wrote and stamped draft positions that
   * were then rejected, so the stamp of tag's page shrinks back to `filledSlots` (the accepted
   * end), and a later read of a rejected slot fails checkRead's coverage. Only the current
   * allocation, only a stamp of its own epoch, never a grow, never while the page is lent to a
   * step in flight (the thread may still be writing it). A page left with 0 filled slots stays
   * the request's (its own free slots), never another's with stale bytes: the ledger moves it.
   */
  rollbackStamp(tag: Tag, filledSlots: number): void {
    const e = this.ledger.entry(tag.page);
    assert(
      e.state === 'allocated' && e.epoch === tag.epoch,
      () => `rollbackStamp: page ${tag.page} is ${describeEntry(e)}, not allocated in epoch ${tag.epoch}`,
    );
    assert(this.#lent[tag.page] === 0, () => `rollbackStamp: page ${tag.page} is lent to the step in flight`);
    const current = this.#stampEpoch[tag.page] === tag.epoch ? (this.#stampFilled[tag.page] as number) : 0;
    assert(
      Number.isInteger(filledSlots) && filledSlots >= 0 && filledSlots <= current,
      () =>
        `rollbackStamp: page ${tag.page} holds ${current} slots of epoch ${tag.epoch}, cannot roll back to ${filledSlots}`,
    );
    if (this.#stampEpoch[tag.page] === tag.epoch) this.#stampFilled[tag.page] = filledSlots;
  }

  /**
   * Rolls the stamps of a page table back so that positions [keptEnd, writtenEnd) are no longer
   * covered (each page holding one keeps only its slots below keptEnd). Returns the pages touched.
   */
  rollbackStamps(tags: readonly Tag[], keptEnd: number, writtenEnd: number): number {
    assert(
      Number.isInteger(keptEnd) && keptEnd >= 0 && keptEnd <= writtenEnd && writtenEnd <= tags.length * this.pageSize,
      () => `rollbackStamps: positions [${keptEnd}, ${writtenEnd}) in a table of ${tags.length} pages`,
    );
    let numPages = 0;
    for (let p = Math.floor(keptEnd / this.pageSize); p * this.pageSize < writtenEnd; p++) {
      this.rollbackStamp(tags[p] as Tag, Math.max(0, keptEnd - p * this.pageSize));
      numPages++;
    }
    return numPages;
  }

  stampOf(page: PageId): Stamp {
    this.ledger.entry(page); // range check
    return { epoch: asEpoch(this.#stampEpoch[page] as number), filledSlots: this.#stampFilled[page] as number };
  }

  /** True when tag's page carries a stamp of tag's epoch covering at least numSlots slots. */
  isWritten(tag: Tag, numSlots: number): boolean {
    return this.#stampEpoch[tag.page] === tag.epoch && (this.#stampFilled[tag.page] as number) >= numSlots;
  }

  /** Before writing: every page is allocated to writer in the tag's epoch. Throws PageCheckError. */
  checkWrite(writer: Owner, tags: readonly Tag[]): void {
    if (this.#skipChecks) return;
    for (const tag of tags) this.#checkOwnership(writer, tag, 'write');
  }

  /**
   * Before reading positions [0, numSlots) through the page table `tags`: each page holding
   * one of them is the reader's (allocated to it, or cached for its tenant and referenced by
   * it) in the tag's epoch, and its stamp carries that epoch and covers every slot read.
   * Pages of the table beyond numSlots are not read and not checked. Throws PageCheckError.
   */
  checkRead(reader: Owner, tags: readonly Tag[], numSlots: number): void {
    if (this.#skipChecks) return;
    assert(Number.isInteger(numSlots) && numSlots >= 0, () => `checkRead: ${numSlots} slots`);
    const numPages = pagesFor(numSlots, this.pageSize);
    assert(
      tags.length >= numPages,
      () => `checkRead: a page table of ${tags.length} pages cannot hold ${numSlots} slots`,
    );
    for (let i = 0; i < numPages; i++) {
      const tag = tags[i] as Tag;
      this.#checkOwnership(reader, tag, 'read');
      const slots = Math.min(this.pageSize, numSlots - i * this.pageSize);
      const stampEpoch = this.#stampEpoch[tag.page] as number;
      const filled = this.#stampFilled[tag.page] as number;
      if (stampEpoch !== tag.epoch || filled < slots) {
        this.#fail(
          tag.page,
          stampEpoch !== tag.epoch ? 'stamp-epoch' : 'stamp-coverage',
          `read check failed on page ${tag.page}: expected a stamp of epoch ${tag.epoch} covering ${slots} slot(s), ` +
            `found a stamp of epoch ${stampEpoch} covering ${filled} slot(s)`,
        );
      }
    }
  }

  /** Bytes of numSlots slots of one page, all layers, K and V (see kv-layout.ts for the order). */
  slotRangeBytes(numSlots: number): number {
    return slotRangeBytes(this.kv, numSlots);
  }

  /**
   * A copy of slots [firstSlot, firstSlot + numSlots) of one page, into `into` when given (see
   * kv-layout.ts: reuse a buffer on hot paths). No ownership check: run checkRead first.
   */
  gatherSlots(page: PageId, firstSlot: number, numSlots: number, into?: Uint8Array): Uint8Array {
    return gatherSlots(this.kv, page, firstSlot, numSlots, into);
  }

  /** Writes bytes into slots of one page. No ownership check: run checkWrite first, stamp after. */
  scatterSlots(page: PageId, firstSlot: number, numSlots: number, bytes: Uint8Array): void {
    this.#refuseLent(page);
    scatterSlots(this.kv, page, firstSlot, numSlots, bytes);
  }

  /**
   * Writes bytes [payloadOffset, payloadOffset + piece.length) of a slot range's payload into
   * their places (a frame landing as it arrives). No ownership check: run checkWrite first.
   */
  scatterSlotsPiece(page: PageId, firstSlot: number, numSlots: number, payloadOffset: number, piece: Uint8Array): void {
    this.#refuseLent(page);
    scatterSlotsPiece(this.kv, page, firstSlot, numSlots, payloadOffset, piece);
  }

  /** The ledger's integrity, plus: no stamp claims more than a page or an epoch the page has not reached. */
  checkIntegrity(): void {
    this.ledger.checkIntegrity();
    for (let page = 0; page < this.kv.numPages; page++) {
      const e = this.ledger.entry(page as PageId);
      const stampEpoch = this.#stampEpoch[page] as number;
      assert(
        (this.#stampFilled[page] as number) <= this.pageSize,
        () => `page ${page} is stamped with ${this.#stampFilled[page]} slots, more than a page`,
      );
      assert(stampEpoch <= e.epoch, () => `page ${page} is stamped in epoch ${stampEpoch}, but is ${describeEntry(e)}`);
    }
  }

  #checkOwnership(who: Owner, tag: Tag, access: Access): void {
    if (!Number.isInteger(tag.page) || tag.page < 0 || tag.page >= this.kv.numPages) {
      // A tag from a peer may name any number: refuse it like any other page that is not ours.
      this.#fail(
        tag.page,
        'not-allocated',
        `${access} check failed on page ${tag.page}: outside the pool (0..${this.kv.numPages - 1})`,
      );
    }
    const fault = ownershipFailure(this.ledger.entry(tag.page), tag, who, access);
    if (fault !== undefined) {
      this.#fail(
        tag.page,
        fault.failure,
        `${access} check failed (${fault.failure}) on page ${tag.page}: expected ${fault.expected}, found ${fault.found}`,
      );
    }
  }

  #fail(page: PageId, failure: PageCheckFailure, message: string): never {
    this.#numCheckFailures++;
    throw new PageCheckError(page, failure, message);
  }
}
