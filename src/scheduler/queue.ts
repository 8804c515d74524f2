// TenantQueues: the waiting requests, first come first served within a tenant and round-robin
// across tenants, so a tenant with many queued requests cannot starve one with a few.
// Owns: per-tenant FIFO queues and the order in which tenants take turns.
// Must never: look at pages or load (the scheduler decides whether the head may start), or skip
// a tenant's head for a later request of the same tenant (that would break FCFS).
//
//   turns:  [B, A, C]          B's head starts next; then B goes to the back of the turns
//   A: a2 a3 ... a20           (when it still has requests), so after b1 comes a2, then c1.
//   B: b1
//   C: c1
import { assert, type RequestId, type TenantId } from '../core/index.js';

export interface Queued {
  readonly rid: RequestId;
  readonly tenant: TenantId;
}

export class TenantQueues<T extends Queued> {
  readonly #queues = new Map<TenantId, T[]>();
  /** Tenants with waiting requests, in the order of their turns; turns[0] is next. */
  #turns: TenantId[] = [];
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** A new request: the back of its tenant's queue; a tenant new to the turns goes last. */
  push(item: T): void {
    this.#queueOf(item.tenant, 'back').push(item);
    this.#size++;
  }

  /**
   * A preempted request: the front of its tenant's queue, so it is the next of its tenant to
   * start. A tenant new to the turns goes first: its request was already admitted once.
   */
  pushFront(item: T): void {
    this.#queueOf(item.tenant, 'front').unshift(item);
    this.#size++;
  }

  /** The request whose turn it is, or undefined when none waits. */
  peek(): T | undefined {
    const tenant = this.#turns[0];
    return tenant === undefined ? undefined : this.#queues.get(tenant)?.[0];
  }

  /** Takes the request whose turn it is; its tenant goes to the back of the turns. */
  pop(): T {
    const tenant = this.#turns.shift();
    assert(tenant !== undefined, 'pop from an empty queue');
    const queue = this.#queues.get(tenant);
    const item = queue?.shift();
    assert(queue !== undefined && item !== undefined, () => `tenant ${tenant} has a turn but no queue`);
    this.#size--;
    if (queue.length > 0) this.#turns.push(tenant);
    else this.#queues.delete(tenant);
    return item;
  }

  /** The head of each tenant's queue, in the order of their turns (the candidates fair sharing picks from). */
  heads(): T[] {
    return this.#turns.map((tenant) => (this.#queues.get(tenant) as T[])[0] as T);
  }

  /** Takes `tenant`'s head (fair sharing chose it); its tenant goes to the back of the turns. */
  popOf(tenant: TenantId): T {
    const index = this.#turns.indexOf(tenant);
    assert(index >= 0, () => `tenant ${tenant} has no waiting request`);
    this.#turns.splice(index, 1);
    this.#turns.unshift(tenant);
    return this.pop();
  }

  /** Removes a request wherever it waits; false when it is not here. Turns keep their order. */
  remove(rid: RequestId): boolean {
    for (const [tenant, queue] of this.#queues) {
      const index = queue.findIndex((item) => item.rid === rid);
      if (index < 0) continue;
      queue.splice(index, 1);
      this.#size--;
      if (queue.length === 0) {
        this.#queues.delete(tenant);
        this.#turns = this.#turns.filter((t) => t !== tenant);
      }
      return true;
    }
    return false;
  }

  /** Every waiting request, in the order they would start if nothing else arrived. */
  toArray(): T[] {
    const queues = new Map([...this.#queues].map(([tenant, queue]) => [tenant, [...queue]]));
    const turns = [...this.#turns];
    const order: T[] = [];
    for (let tenant = turns.shift(); tenant !== undefined; tenant = turns.shift()) {
      const queue = queues.get(tenant) as T[];
      order.push(queue.shift() as T);
      if (queue.length > 0) turns.push(tenant);
    }
    return order;
  }

  /** Every tenant with a queue has exactly one turn, and the sizes add up. Throws InvariantError. */
  checkIntegrity(): void {
    assert(new Set(this.#turns).size === this.#turns.length, () => `a tenant has two turns: ${this.#turns.join(', ')}`);
    assert(
      this.#turns.length === this.#queues.size,
      () => `${this.#turns.length} turns for ${this.#queues.size} tenant queues`,
    );
    let size = 0;
    for (const [tenant, queue] of this.#queues) {
      assert(queue.length > 0 && this.#turns.includes(tenant), () => `tenant ${tenant} has an empty queue or no turn`);
      assert(
        queue.every((item) => item.tenant === tenant),
        () => `tenant ${tenant}'s queue holds another tenant's request`,
      );
      size += queue.length;
    }
    assert(size === this.#size, () => `queues hold ${size} requests, the count says ${this.#size}`);
  }

  #queueOf(tenant: TenantId, turn: 'front' | 'back'): T[] {
    let queue = this.#queues.get(tenant);
    if (queue === undefined) {
      queue = [];
      this.#queues.set(tenant, queue);
      if (turn === 'front') this.#turns.unshift(tenant);
      else this.#turns.push(tenant);
    }
    return queue;
  }
}
