// WaitQueue: client requests the cluster had no room for yet (an `overloaded` answer before any
// token: no free slot or pages on a decode, a busy prefill, no pair), waiting their turn instead
// of getting a 503, as a co-located node's scheduler queue does.
// Owns: the order, the bound on how many wait and for how long. Pure: time is an argument.
// The order: with `fairness`, the tenant with the smallest virtual token counter (the
// scheduler's TenantCounters, charged with a request's prompt tokens when it is taken; a tenant
// whose first request parks is lifted to the smallest counter of the tenants waiting), first
// come first served within a tenant; without (the fault `no-tenant-fairness`), arrival order.
// Arrival order is the router's numbering of client requests, not the order they park in: the
// first requests of a burst are all tried at once (the queue was empty) and refused in any order,
// and one tried again from the queue and refused goes back to its place, not behind later ones.
// Must never: hold a request past its deadline, reorder one tenant's requests, or give a tenant
// back a charge it never paid (only a request taken from here and refused again gets its charge
// back).

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

/** A waiting request and its place in arrival order. */
interface Entry<T> extends Waiting<T> {
  readonly arrival: number;
}

export const DEFAULT_WAIT_QUEUE: WaitQueueOptions = { maxWaiting: 1024, maxWaitMs: 60_000 };

export class WaitQueue<T> {
  readonly options: WaitQueueOptions;
  /** Sorted by arrival. */
  readonly #queue: Entry<T>[] = [];
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
   * Queue `item`, number `arrival` in the order clients sent requests, first waiting since
   * `sinceMs` (now for a new one; its first wait for one that was tried again): it goes before
   * every waiting request that arrived after it. `taken`: it came from take() and was refused
   * again, so the charge of that take comes back. False: full or past its wait.
   */
  park(item: T, arrival: number, sinceMs: number, nowMs: number, taken: boolean): boolean {
    if (this.#queue.length >= this.options.maxWaiting || nowMs - sinceMs >= this.options.maxWaitMs) return false;
    let at = this.#queue.length;
    while (at > 0 && (this.#queue[at - 1] as Entry<T>).arrival > arrival) at--;
    this.#queue.splice(at, 0, { item, sinceMs, arrival });
    const f = this.#fairness;
    if (f !== undefined) {
      this.#counters.join(f.tenantOf(item));
      if (taken) this.#counters.charge(f.tenantOf(item), -f.tokensOf(item), 'input');
    }
    return true;
  }

  /** The request to try again: the longest-waiting one, or with fairness the least-served tenant's first. */
  take(): Waiting<T> | undefined {
    const f = this.#fairness;
    if (f === undefined) return waiting(this.#queue.shift());
    const firsts = new Map<TenantId, { tenant: TenantId; numTokensLeft: number; order: number }>();
    this.#queue.forEach((w, order) => {
      const tenant = f.tenantOf(w.item);
      if (!firsts.has(tenant)) firsts.set(tenant, { tenant, numTokensLeft: f.tokensOf(w.item), order });
    });
    const pick = this.#counters.pick([...firsts.values()]);
    if (pick === undefined) return undefined;
    const [taken] = this.#queue.splice(pick.order, 1) as [Entry<T>];
    this.#counters.charge(pick.tenant, pick.numTokensLeft, 'input');
    this.#counters.leave(pick.tenant);
    return waiting(taken);
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
      const w = this.#queue[i] as Entry<T>;
      if (!match(w)) continue;
      this.#queue.splice(i, 1);
      gone.unshift(waiting(w) as Waiting<T>);
      if (this.#fairness !== undefined) this.#counters.leave(this.#fairness.tenantOf(w.item));
    }
    return gone;
  }
}

/** The entry as callers see it (its arrival number is the queue's own business). */
function waiting<T>(entry: Entry<T> | undefined): Waiting<T> | undefined {
  return entry === undefined ? undefined : { item: entry.item, sinceMs: entry.sinceMs };
}
