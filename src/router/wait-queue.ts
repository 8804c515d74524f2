// WaitQueue: client requests the cluster had no room for yet (an `overloaded` answer before any
// token: no free slot or pages on a decode, a busy prefill, no pair), waiting their turn in
// arrival order instead of getting a 503, as a co-located node's scheduler queue does.
// Owns: the order, the bound on how many wait and for how long. Pure: time is an argument.
// Must never: hold a request past its deadline, or reorder those that wait (a request that
// was tried again and refused goes back to the front).

export interface Waiting<T> {
  readonly item: T;
  /** When it first had to wait. */
  readonly sinceMs: number;
}

export interface WaitQueueOptions {
  /** Most requests waiting; one more is refused at once. */
  readonly maxWaiting: number;
  /** Longest wait; then the request fails as overloaded. */
  readonly maxWaitMs: number;
}

export const DEFAULT_WAIT_QUEUE: WaitQueueOptions = { maxWaiting: 1024, maxWaitMs: 60_000 };

export class WaitQueue<T> {
  readonly options: WaitQueueOptions;
  readonly #queue: Waiting<T>[] = [];

  constructor(options: WaitQueueOptions = DEFAULT_WAIT_QUEUE) {
    if (!(options.maxWaiting >= 0 && options.maxWaitMs >= 0)) throw new RangeError('WaitQueue: limits must be >= 0');
    this.options = options;
  }

  get size(): number {
    return this.#queue.length;
  }

  /**
   * Queue `item`, first waiting since `sinceMs` (now for a new one; its first wait for one that
   * was tried again). `front`: a retried request keeps its place. False: full or past its wait.
   */
  park(item: T, sinceMs: number, nowMs: number, front: boolean): boolean {
    if (this.#queue.length >= this.options.maxWaiting || nowMs - sinceMs >= this.options.maxWaitMs) return false;
    const entry = { item, sinceMs };
    if (front) this.#queue.unshift(entry);
    else this.#queue.push(entry);
    return true;
  }

  /** The longest-waiting request, to try again. */
  take(): Waiting<T> | undefined {
    return this.#queue.shift();
  }

  /** Removes the requests for which `match` holds (the client left). */
  remove(match: (item: T) => boolean): Waiting<T>[] {
    const gone: Waiting<T>[] = [];
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      if (match((this.#queue[i] as Waiting<T>).item)) gone.unshift(...this.#queue.splice(i, 1));
    }
    return gone;
  }

  /** Removes and returns the requests whose wait ran out by `nowMs`. */
  expired(nowMs: number): Waiting<T>[] {
    const out: Waiting<T>[] = [];
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      const w = this.#queue[i] as Waiting<T>;
      if (nowMs - w.sinceMs >= this.options.maxWaitMs) out.unshift(...this.#queue.splice(i, 1));
    }
    return out;
  }
}
