// TenantCounters: the Virtual Token Counter of Sheng et al. ("Fairness in Serving Large Language
// Models", OSDI '24): one counter per tenant, charged for the service it got (inputWeight per
// prompt token computed, outputWeight per token decoded); the plan serves the tenant with the
// smallest counter first (plan.ts asks pickFair which of the candidates goes next).
// Owns: the counters, which tenants are active (have a request on this node), the lift of a
// tenant that becomes active, and the order of candidates.
// Must never: decide whether a request may run (admission, pages, the running limit and the
// budgets stay the plan's: fairness changes only the order), read a clock, or grow with history
// (counters of idle tenants that could owe nothing are dropped).
//
// The lift: a tenant that becomes active gets max(its counter, the smallest counter of the
// tenants already active), so time spent idle banks no credit: a tenant that stayed away
// during a long busy period does not come back to a monopoly, and one that was served a lot
// still owes it. When no tenant is active, nobody owes anybody: the counters are cleared.
//
//   A active alone, counter 900; B arrives (counter 0) -> lifted to 900; each step, the smaller
//   counter goes first: B's short prompt (20 tokens: 920) before A's next chunk (256: 1156).
import { assert, type TenantId } from '../core/index.js';

export interface FairShareWeights {
  /** Charge per prompt token computed (the paper's w_p; default 1). */
  readonly inputWeight: number;
  /** Charge per output token decoded (the paper's w_q; default 2: a decode token costs more per token served). */
  readonly outputWeight: number;
}

export const DEFAULT_FAIR_SHARE: FairShareWeights = { inputWeight: 1, outputWeight: 2 };

/** One request that may get tokens next: a running prompt's next chunk, or a waiting tenant's head. */
export interface FairCandidate {
  readonly tenant: TenantId;
  /** Tokens it still has to compute (fewer first among equal counters: the paper's shortest-first tie). */
  readonly numTokensLeft: number;
  /** Its place in first-come-first-served order (lower first among the rest). */
  readonly order: number;
}

export class TenantCounters {
  readonly weights: FairShareWeights;
  readonly #counters = new Map<TenantId, number>();
  /** Tenants with a request on this node, and how many. */
  readonly #active = new Map<TenantId, number>();

  constructor(weights: FairShareWeights = DEFAULT_FAIR_SHARE) {
    if (!(weights.inputWeight > 0 && weights.outputWeight > 0))
      throw new RangeError(`fair-share weights must be positive, got ${weights.inputWeight}, ${weights.outputWeight}`);
    this.weights = weights;
  }

  counterOf(tenant: TenantId): number {
    return this.#counters.get(tenant) ?? 0;
  }

  get numActive(): number {
    return this.#active.size;
  }

  /** Counters kept (active tenants, and idle ones that still owe service); bounded by pruning. */
  get numCounters(): number {
    return this.#counters.size;
  }

  /** A request of `tenant` arrived on this node; its first lifts the tenant's counter. */
  join(tenant: TenantId): void {
    const n = this.#active.get(tenant) ?? 0;
    this.#active.set(tenant, n + 1);
    if (n > 0) return;
    if (this.#active.size === 1) {
      this.#counters.clear();
      this.#counters.set(tenant, 0);
      return;
    }
    this.#active.delete(tenant);
    const floor = this.#minActive() as number;
    this.#active.set(tenant, 1);
    this.#counters.set(tenant, Math.max(this.counterOf(tenant), floor));
    if (this.#counters.size > 2 * this.#active.size + 16) this.#prune(floor);
  }

  /** A request of `tenant` left this node (ended, failed, aborted). */
  leave(tenant: TenantId): void {
    const n = this.#active.get(tenant);
    assert(n !== undefined && n > 0, () => `tenant ${tenant} leaves with no request here`);
    if (n > 1) {
      this.#active.set(tenant, n - 1);
      return;
    }
    this.#active.delete(tenant);
    const floor = this.#minActive();
    // An idle tenant at or under the floor would be lifted to it anyway: it needs no record.
    if (floor === undefined || this.counterOf(tenant) <= floor) this.#counters.delete(tenant);
  }

  /** Service given (numTokens may be negative: a refund of a chunk planned, then preempted in the same plan). */
  charge(tenant: TenantId, numTokens: number, kind: 'input' | 'output'): void {
    const weight = kind === 'input' ? this.weights.inputWeight : this.weights.outputWeight;
    this.#counters.set(tenant, this.counterOf(tenant) + weight * numTokens);
  }

  /** The candidate to serve next: the smallest counter, then the fewest tokens left, then the oldest. */
  pick<C extends FairCandidate>(candidates: readonly C[]): C | undefined {
    let best: C | undefined;
    let bestCounter = Infinity;
    for (const c of candidates) {
      const counter = this.counterOf(c.tenant);
      if (
        best === undefined ||
        counter < bestCounter ||
        (counter === bestCounter &&
          (c.numTokensLeft < best.numTokensLeft || (c.numTokensLeft === best.numTokensLeft && c.order < best.order)))
      ) {
        best = c;
        bestCounter = counter;
      }
    }
    return best;
  }

  #minActive(): number | undefined {
    let min: number | undefined;
    for (const tenant of this.#active.keys()) {
      const c = this.counterOf(tenant);
      if (min === undefined || c < min) min = c;
    }
    return min;
  }

  /** Drops idle tenants' counters at or under `floor` (amortized: runs when the map doubled past the active set). */
  #prune(floor: number): void {
    for (const [tenant, counter] of this.#counters) {
      if (!this.#active.has(tenant) && counter <= floor) this.#counters.delete(tenant);
    }
  }
}
