// What the two PD roles (prefill-worker.ts, decode-worker.ts) share around their own life of a
// request: listening on the cluster address, carrying out the network effects of their machine,
// refusing new work once closing or broken, the scheduler and the engine loop wired alike
// (sampling state, grammar masks, step hooks), the /health, stats, metrics and page-map frames,
// and a close() that drains the transfers in flight. Each role keeps only what is its own.
// Must never: decide anything about a request (the machines and the scheduler do), or poll: the
// drain wakes on the machine's effects (a request ends with one) and on its deadline.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  InvariantError,
  syncAborts,
  TesseraError,
  TotalsMirror,
  assertNever,
  type BackendHealth,
  type BackendStats,
  type NodePageMap,
  type AdapterRef,
  type PdMetricsSink,
  type RequestId,
  type SamplingParams,
} from '../core/index.js';
import type { TokenConstraint } from '../grammar/index.js';
import type { PagePool } from '../pages/index.js';
import type { Scheduler, SchedulerEvent } from '../scheduler/index.js';
import {
  TcpTransport,
  type ChunkHandlers,
  type NetworkEffect,
  type PrefixMessage,
  type Transport,
  type TransportHandlers,
} from '../transfer/index.js';
import { prepareConstraints } from './constraints.js';
import { EngineLoop, type EngineLoopOptions } from '../engine/index.js';
import { pdHealth } from './health.js';
import { HookedRunner, type StepHooks } from './hooked-runner.js';
import { abortTotals, nodePageMap, type NodePageMapParts } from './page-map.js';
import type { PdWorkerOptions } from './pd-common.js';
import { schedulerFor } from './scheduler-for.js';
import { LoraRegistry } from './lora-registry.js';

/** The machine a role runs, as far as the shared parts look at it. */
export interface RoleMachine {
  readonly numActive: number;
  stats(): object;
}

/** What a role keeps of a live request for its sampling: the parameters and the grammar's state. */
export interface RoleSampling {
  readonly sampling: SamplingParams;
  readonly constraint?: TokenConstraint;
}

/** The role's own parts of its engine loop; the rest is wired alike for both roles. */
export interface RoleLoopParts {
  /** A live request's sampling record; undefined once it ended here. */
  readonly recordOf: (rid: RequestId) => RoleSampling | undefined;
  /** Decode samples after its own output (the scheduler's); prefill samples only a first token. */
  readonly outputs: boolean;
  readonly before: StepHooks['before'];
  readonly onEvents: (events: readonly SchedulerEvent[]) => void;
  readonly onFatal: (error: unknown) => void;
  /** The role's own loop options (beside, promptLogprobsOf, pool). */
  readonly more?: Partial<EngineLoopOptions>;
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
  readonly scheduler: Scheduler;
  readonly pool: PagePool;
  readonly mirror = new TotalsMirror();
  /** The LoRA adapters this worker serves (--lora at start, and the router's hot loads through /v1/load_lora_adapter). */
  readonly adapters: LoraRegistry | undefined;
  metrics: PdMetricsSink | undefined;
  #closed = false;
  #machine: RoleMachine | undefined;
  #loop: EngineLoop | undefined;
  #idle: (() => void) | undefined;

  constructor(role: 'prefill' | 'decode', options: PdWorkerOptions, transport: Transport) {
    this.role = role;
    this.options = options;
    this.transport = transport;
    this.pool = options.pool;
    this.scheduler = schedulerFor(role, options);
    // Loaded at start (--lora) and by the router's fan-out (its admin's hot loads). An unload takes
    // the name at once; the weights stay until this node's last request under it ended (settle()
    // after each step), so no step runs a request whose adapter was dropped.
    this.adapters =
      options.lora === undefined
        ? undefined
        : new LoraRegistry(options.lora, (name) => this.scheduler.numWithAdapter(name), {
            deferUnload: true,
            faults: options.faults,
          });
  }

  /** Builds and starts the engine loop (once, after the machine): the role's scheduler, runner, sampler and grammar masks. */
  startLoop(parts: RoleLoopParts): EngineLoop {
    const o = this.options;
    const scheduler = this.scheduler;
    this.#loop = new EngineLoop({
      scheduler,
      runner: new HookedRunner(o.runner, { before: parts.before }),
      sampler: o.sampler,
      samplingOf: (rid) => {
        const record = parts.recordOf(rid);
        if (record === undefined) return undefined;
        const view = parts.outputs ? scheduler.view(rid) : undefined;
        if (parts.outputs && (view === undefined || view.state === 'ending')) return undefined;
        const { constraint } = record;
        return {
          params: record.sampling,
          numOutputTokens: view?.numOutputTokens ?? 0,
          outputTokens: () => (parts.outputs ? scheduler.outputTokens(rid) : []),
          ...(constraint === undefined
            ? {}
            : { mask: () => constraint.mask(), draftMasks: (drafts) => constraint.draftMasks(drafts) }),
        };
      },
      prepareSampling: (items) => prepareConstraints(items, (rid) => parts.recordOf(rid)?.constraint),
      onEvents: (events) => {
        parts.onEvents(events);
        if (this.adapters !== undefined && this.adapters.numRetiring > 0) void this.adapters.settle();
      },
      onFatal: parts.onFatal,
      faults: o.faults,
      checkEveryStep: o.checkEveryStep,
      ...(o.maxStepMs === undefined ? {} : { maxStepMs: o.maxStepMs }),
      ...parts.more,
    });
    this.#loop.start();
    return this.#loop;
  }

  get loop(): EngineLoop {
    if (this.#loop === undefined) throw new InvariantError('PdRole: the loop is not started');
    return this.#loop;
  }

  /** The scheduler holds nothing and no transfer is live. */
  get isIdle(): boolean {
    return this.scheduler.isIdle && this.machine.numActive === 0;
  }

  /** The machine's byte and abort totals into /metrics (as deltas since the last call); the sink, if any. */
  syncMetrics(bytes: number, abortsByState: Readonly<Record<string, number>>): PdMetricsSink | undefined {
    const m = this.metrics;
    if (m === undefined) return undefined;
    m.addTransferBytes(this.mirror.delta('bytes', bytes));
    syncAborts(this.mirror, m, abortsByState);
    return m;
  }

  /** The operator's page map: the shared frame around the role's transfers and totals (its aborts appended). */
  pageMap(
    parts: Pick<NodePageMapParts, 'waiting' | 'transfers' | 'quarantined' | 'totals'>,
    abortsByState: Readonly<Record<string, number>>,
    speculation?: NodePageMapParts['speculation'],
  ): NodePageMap {
    return nodePageMap({
      role: this.role,
      node: this.transport.nodeId,
      pool: this.pool,
      loop: this.loop.stats,
      running: this.scheduler.numRunning,
      ...parts,
      totals: { ...parts.totals, ...abortTotals(abortsByState) },
      ...(speculation === undefined ? {} : { speculation }),
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The role's machine (set once, right after it was built, before the loop). */
  set machine(machine: RoleMachine) {
    this.#machine = machine;
  }

  get machine(): RoleMachine {
    if (this.#machine === undefined) throw new InvariantError('PdRole: the machine is not set');
    return this.#machine;
  }

  /** The refusal of new work once closing, or after the loop stopped on a bug; undefined: take it. */
  refusal(): TesseraError | undefined {
    if (this.#closed) return new TesseraError('overloaded', `this ${this.role} worker is shutting down`);
    if (!this.loop.healthy) return new InvariantError(`this ${this.role} worker stopped after an internal error`);
    return undefined;
  }

  /**
   * A Reserve's or Prefill's LoRA adapter against this worker's: undefined when it serves that
   * name under the same digest (the file and scale the router named), else the honest refusal:
   * a worker started without the adapter, or with another file under its name, never computes
   * or decodes under it.
   */
  adapterRefusal(adapter: AdapterRef | undefined): TesseraError | undefined {
    if (adapter === undefined) return undefined;
    const digest = this.adapters?.digestOf(adapter.name);
    if (digest === undefined)
      return new TesseraError(
        'model_not_found',
        `this ${this.role} worker does not serve the LoRA adapter ${adapter.name}: start it with --lora ${adapter.name}=PATH, as the router`,
      );
    if (digest !== adapter.digest)
      return new TesseraError(
        'config_invalid',
        `this ${this.role} worker serves LoRA adapter ${adapter.name} with digest ${digest}, the router ${adapter.digest}: the cluster's --lora files differ`,
      );
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

  health(own: Readonly<Record<string, unknown>>): BackendHealth {
    const m = this.machine;
    const { loop, scheduler, pool } = this;
    const idle = this.isIdle;
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
        this.adapters === undefined ? own : { ...own, loraAdapters: this.adapters.digests() },
      ),
    };
  }

  stats(requestsWaiting: number): BackendStats {
    return {
      kvPages: this.pool.ledger.counts(),
      requestsRunning: this.scheduler.numRunning,
      requestsWaiting,
      tagMismatchesTotal: this.pool.numCheckFailures,
    };
  }

  /**
   * Stops taking work, waits up to drainMs for the machine's transfers to end (woken by its
   * effects, not by polling), then stops the driver, closes every connection, lets the role end
   * what is left (`endAll`) and stops the loop.
   */
  async close(drainMs: number, stopDriver: () => void, endAll: () => void): Promise<void> {
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
    await this.loop.close();
  }
}
