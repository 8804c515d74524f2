// WaitQueue: client requests the cluster had no room for yet (an `overloaded` answer before any
// token: no free slot or pages on a decode, a busy prefill, no pair), waiting their turn instead
// of getting a 503, as a co-located node's scheduler queue does.
// Owns: the order, the bound on how many wait and for how long. Pure: time is an argument.
// The order: with `fairness`, the tenant with the smallest virtual token counter (the
// scheduler's TenantCounters, charged with a request's prompt tokens when it is taken; a tenant
// whose first request parks is lifted to the smallest counter of the tenants waiting), first
// come first served within a tenant; without (the fault `no-tenant-fairness`), arrival order.
// Must never: hold a request past its deadline, or reorder one tenant's requests (a request
// that was tried again and refused goes back to the front, and its charge is given back).

import type { TenantId } from '../core/index.js';
import { TenantCounters } from '../scheduler/index.js';

/** What fair order needs to know of an item. */
export interface WaitFairness<T> {
  tenantOf(item: T): TenantId;
  /** Its prompt's tokens: the charge when it is taken. */
  tokensOf(item: T): number;
}

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
  readonly #fairness: WaitFairness<T> | undefined;
  readonly #counters = new TenantCounters();

  constructor(options: WaitQueueOptions = DEFAULT_WAIT_QUEUE, fairness?: WaitFairness<T>) {
    if (!(options.maxWaiting >= 0 && options.maxWaitMs >= 0)) throw new RangeError('WaitQueue: limits must be >= 0');
    this.options = options;
    this.#fairness = fairness;
  }

  get size(): number {
    return this.#queue.length;
  }

  /** A tenant's virtual token counter here (0 without fairness). */
  counterOf(tenant: TenantId): number {
    return this.#counters.counterOf(tenant);
  }

  /**
   * Queue `item`, first waiting since `sinceMs` (now for a new one; its first wait for one that
   * was tried again). `front`: a retried request keeps its place (and gets back the charge of
   * its take). False: full or past its wait.
   */
  park(item: T, sinceMs: number, nowMs: number, front: boolean): boolean {
    if (this.#queue.length >= this.options.maxWaiting || nowMs - sinceMs >= this.options.maxWaitMs) return false;
    const entry = { item, sinceMs };
    if (front) this.#queue.unshift(entry);
    else this.#queue.push(entry);
    const f = this.#fairness;
    if (f !== undefined) {
      this.#counters.join(f.tenantOf(item));
      if (front) this.#counters.charge(f.tenantOf(item), -f.tokensOf(item), 'input');
    }
    return true;
  }

  /** The request to try again: the longest-waiting one, or with fairness the least-served tenant's first. */
  take(): Waiting<T> | undefined {
    const f = this.#fairness;
    if (f === undefined) return this.#queue.shift();
    const firsts = new Map<TenantId, { tenant: TenantId; numTokensLeft: number; order: number }>();
    this.#queue.forEach((w, order) => {
      const tenant = f.tenantOf(w.item);
      if (!firsts.has(tenant)) firsts.set(tenant, { tenant, numTokensLeft: f.tokensOf(w.item), order });
    });
    const pick = this.#counters.pick([...firsts.values()]);
    if (pick === undefined) return undefined;
    const [taken] = this.#queue.splice(pick.order, 1) as [Waiting<T>];
    this.#counters.charge(pick.tenant, pick.numTokensLeft, 'input');
    this.#counters.leave(pick.tenant);
    return taken;
  }

  /** Removes the requests for which `match` holds (the client left). */
  remove(match: (item: T) => boolean): Waiting<T>[] {
    return this.#drop((w) => match(w.item));
  }

  /** Removes and returns the requests whose wait ran out by `nowMs`. */
  expired(nowMs: number): Waiting<T>[] {
    return this.#drop((w) => nowMs - w.sinceMs >= this.options.maxWaitMs);
  }

  #drop(match: (w: Waiting<T>) => boolean): Waiting<T>[] {
    const gone: Waiting<T>[] = [];
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      const w = this.#queue[i] as Waiting<T>;
      if (!match(w)) continue;
      gone.unshift(...this.#queue.splice(i, 1));
      if (this.#fairness !== undefined) this.#counters.leave(this.#fairness.tenantOf(w.item));
    }
    return gone;
  }
}
