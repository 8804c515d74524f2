// What the two PD roles (prefill-worker.ts, decode-worker.ts) share around their own life of a
// request: listening on the cluster address, carrying out the network effects of their machine,
// refusing new work once closing or broken, the /health and stats frames, and a close() that
// drains the transfers in flight. Each role keeps only what is its own.
// Must never: decide anything about a request (the machines and the scheduler do), or poll: the
// drain wakes on the machine's effects (a request ends with one) and on its deadline.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  InvariantError,
  TesseraError,
  TotalsMirror,
  assertNever,
  type BackendHealth,
  type BackendStats,
  type PdMetricsSink,
} from '../core/index.js';
import type { PagePool } from '../pages/index.js';
import type { Scheduler } from '../scheduler/index.js';
import {
  TcpTransport,
  type ChunkHandlers,
  type NetworkEffect,
  type PrefixMessage,
  type Transport,
  type TransportHandlers,
} from '../transfer/index.js';
import type { EngineLoop } from './engine-loop.js';
import { pdHealth } from './health.js';
import type { PdWorkerOptions } from './pd-common.js';

/** The machine a role runs, as far as the shared parts look at it. */
export interface RoleMachine {
  readonly numActive: number;
  stats(): object;
}

/** Handlers the role installs once it exists (the transport is listening before). */
export interface LateHandlers {
  handlers: TransportHandlers | undefined;
  chunks: ChunkHandlers | undefined;
  /** The prefix store's messages (the cluster-wide prefix store, transfer/prefix-fetch-store.ts). */
  prefix: ((from: string, message: PrefixMessage) => void) | undefined;
}

/**
 * Listens on the cluster address; events go to `late`'s handlers once set. `dial`: prefill
 * dials decode to push frames; decode only answers. `streamChunks`: KvChunk payloads are handed
 * over piece by piece as they arrive (decode lands them in place).
 */
export async function listenCluster(
  o: PdWorkerOptions,
  dial: boolean,
  streamChunks: boolean,
): Promise<{ transport: Transport; late: LateHandlers }> {
  const late: LateHandlers = { handlers: undefined, chunks: undefined, prefix: undefined };
  const transport = await TcpTransport.listen({
    host: o.clusterHost,
    port: o.clusterPort,
    secret: o.clusterSecret,
    dial,
    faults: o.faults,
    handlers: {
      connected: (peer) => late.handlers?.connected(peer),
      message: (from, message) => late.handlers?.message(from, message),
      closed: (peer, reason) => late.handlers?.closed(peer, reason),
      prefix: (from, message) => late.prefix?.(from, message),
      ...(streamChunks
        ? {
            chunks: {
              begin: (from, head) => late.chunks?.begin(from, head),
              piece: (from, bytes) => late.chunks?.piece(from, bytes),
              end: (from) => late.chunks?.end(from),
            },
          }
        : {}),
    },
  });
  return { transport, late };
}

export class PdRole {
  readonly role: 'prefill' | 'decode';
  readonly options: PdWorkerOptions;
  readonly transport: Transport;
  readonly mirror = new TotalsMirror();
  metrics: PdMetricsSink | undefined;
  #closed = false;
  #machine: RoleMachine | undefined;
  #idle: (() => void) | undefined;

  constructor(role: 'prefill' | 'decode', options: PdWorkerOptions, transport: Transport) {
    this.role = role;
    this.options = options;
    this.transport = transport;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The role's machine (set once, right after it was built). */
  set machine(machine: RoleMachine) {
    this.#machine = machine;
  }

  get machine(): RoleMachine {
    if (this.#machine === undefined) throw new InvariantError('PdRole: the machine is not set');
    return this.#machine;
  }

  /** The refusal of new work once closing, or after the loop stopped on a bug; undefined: take it. */
  refusal(loop: EngineLoop): TesseraError | undefined {
    if (this.#closed) return new TesseraError('overloaded', `this ${this.role} worker is shutting down`);
    if (!loop.healthy) return new InvariantError(`this ${this.role} worker stopped after an internal error`);
    return undefined;
  }

  /** Carries out a network effect of the machine; each one may end a request, so a drain looks again. */
  carryOut(effect: NetworkEffect): void {
    switch (effect.kind) {
      case 'send':
        this.transport.send(effect.to, effect.message);
        break;
      case 'closePeer':
        this.transport.closePeer(effect.peer, effect.reason);
        break;
      default:
        assertNever(effect, 'network effect');
    }
    if (this.#idle !== undefined && this.machine.numActive === 0) this.#idle();
  }

  health(
    loop: EngineLoop,
    scheduler: Scheduler,
    pool: PagePool,
    idle: boolean,
    own: Readonly<Record<string, unknown>>,
  ): BackendHealth {
    const m = this.machine;
    return {
      healthy: loop.healthy && !this.#closed,
      detail: pdHealth(
        {
          role: this.role,
          options: this.options,
          address: this.transport.nodeId,
          pool,
          idle,
          running: scheduler.numRunning,
          active: m.numActive,
          transfer: m.stats(),
          transport: this.transport.stats(),
          loop: loop.stats,
        },
        own,
      ),
    };
  }

  stats(scheduler: Scheduler, pool: PagePool, requestsWaiting: number): BackendStats {
    return {
      kvPages: pool.ledger.counts(),
      requestsRunning: scheduler.numRunning,
      requestsWaiting,
      tagMismatchesTotal: pool.numCheckFailures,
    };
  }

  /**
   * Stops taking work, waits up to drainMs for the machine's transfers to end (woken by its
   * effects, not by polling), then stops the driver, closes every connection, lets the role end
   * what is left (`endAll`) and stops the loop.
   */
  async close(drainMs: number, stopDriver: () => void, endAll: () => void, loop: EngineLoop): Promise<void> {
    this.#closed = true;
    if (this.machine.numActive > 0 && drainMs > 0) {
      const ac = new AbortController();
      const idle = new Promise<void>((resolve) => (this.#idle = resolve));
      await Promise.race([idle, sleep(drainMs, undefined, { signal: ac.signal }).catch(() => undefined)]);
      ac.abort();
      this.#idle = undefined;
    }
    stopDriver();
    await this.transport.close();
    endAll();
    await loop.close();
  }
}
