// The tokenizer pool's waiting room (tokenizer-pool.ts): which waiting job an idle thread takes.
// Pure and synchronous: no threads, no clock, no timers.
//
// Order: shortest job first, with aging. A thread takes the waiting job with the least text, so a
// 16K-character prompt never waits behind four 4 MB ones; but a job that MAX_PASSES shorter jobs
// have overtaken is taken next (oldest first), so a stream of short prompts cannot starve a long
// one. The reserved thread (thread 0 of two or more) takes only jobs under RESERVED_MAX_CHARS:
// however many long prompts arrive, short ones have a thread within one short job's time.
// Linear in the number waiting per take (the pool bounds it), never in the text.
// `fifo` (the `fifo-tokenizer-queue` fault point, tests only): arrival order, the queue as it was.
// It must never lose a job: each added job leaves exactly once, by take() or remove().

/** A job under this much text (UTF-16 units, about 50-150 ms of work) may go to the reserved thread. */
export const RESERVED_MAX_CHARS = 64 * 1024;

/** Overtaken by this many shorter jobs, a job goes next. */
export const MAX_PASSES = 16;

export interface Queued {
  /** Arrival order. */
  readonly seq: number;
  readonly numChars: number;
}

interface Entry<T extends Queued> {
  readonly item: T;
  passes: number;
}

export class TokenizerQueue<T extends Queued> {
  readonly #waiting: Entry<T>[] = [];
  #numChars = 0;
  readonly #fifo: boolean;

  constructor(options: { readonly fifo?: boolean } = {}) {
    this.#fifo = options.fifo ?? false;
  }

  get length(): number {
    return this.#waiting.length;
  }

  /** Text (UTF-16 units) of every waiting job. */
  get numChars(): number {
    return this.#numChars;
  }

  add(item: T): void {
    this.#waiting.push({ item, passes: 0 });
    this.#numChars += item.numChars;
  }

  /** The next job for a thread (`reserved`: only a short one), or undefined. */
  take(reserved: boolean): T | undefined {
    let pick = -1;
    for (let i = 0; i < this.#waiting.length; i++) {
      const entry = this.#waiting[i] as Entry<T>;
      if (reserved && entry.item.numChars >= RESERVED_MAX_CHARS) continue;
      if (this.#fifo || (!reserved && entry.passes >= MAX_PASSES)) {
        pick = i; // the oldest overtaken job: arrival order is array order
        break;
      }
      if (pick < 0 || entry.item.numChars < (this.#waiting[pick] as Entry<T>).item.numChars) pick = i;
    }
    if (pick < 0) return undefined;
    const [taken] = this.#waiting.splice(pick, 1) as [Entry<T>];
    // Every older, longer job was overtaken once more.
    for (let i = 0; i < pick; i++) {
      const entry = this.#waiting[i] as Entry<T>;
      if (entry.item.numChars > taken.item.numChars) entry.passes++;
    }
    this.#numChars -= taken.item.numChars;
    return taken.item;
  }

  /** Takes `item` out (its wait ran out); false if it had already left. */
  remove(item: T): boolean {
    const i = this.#waiting.findIndex((e) => e.item === item);
    if (i < 0) return false;
    this.#waiting.splice(i, 1);
    this.#numChars -= item.numChars;
    return true;
  }

  /** Every waiting job, oldest first; the queue is left empty. */
  drain(): T[] {
    this.#numChars = 0;
    return this.#waiting.splice(0).map((e) => e.item);
  }

  /** Jobs and text waiting ahead of `item` by the order take() would follow (for honest errors). */
  ahead(item: T): { readonly numJobs: number; readonly numChars: number } {
    let numJobs = 0;
    let numChars = 0;
    for (const e of this.#waiting)
      if (e.item !== item && e.item.numChars <= item.numChars) {
        numJobs++;
        numChars += e.item.numChars;
      }
    return { numJobs, numChars };
  }
}
