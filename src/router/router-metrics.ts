// RouterMetrics: the PD series of the router's /metrics: transfer time from Prefill sent to the
// first tokens (the machine's `transferTimed` effect), aborts by phase (the machine's stats), and
// the cluster's transfer bytes and checksum failures as its decode workers report them.
// Load (attempts per worker) is the machine's own count (RouterMachine.inFlightOn); nothing here
// reads the trace, so changing a trace changes no metric and no pair.
// Must never: change what the machine decides; count a worker's totals twice.
import { syncAborts, TotalsMirror, type PdMetricsSink } from '../core/index.js';
import type { RouterStats } from '../transfer/index.js';
import type { WorkerRegistry } from './workers.js';

export class RouterMetrics {
  readonly #registry: WorkerRegistry;
  readonly #mirror = new TotalsMirror();
  #sink: PdMetricsSink | undefined;

  constructor(registry: WorkerRegistry) {
    this.#registry = registry;
  }

  attach(sink: PdMetricsSink): void {
    this.#sink = sink;
  }

  /** The machine's `transferTimed` effect. */
  transferTimed(ms: number): void {
    this.#sink?.observeTransferSeconds(ms / 1000);
  }

  /** A request waited in the router's queue for room on the cluster, this long until its first token. */
  queueWaited(seconds: number): void {
    this.#sink?.observeQueueWaitSeconds(seconds);
  }

  /** Scrape time: aborts by phase from the machine, bytes and checksum failures from the decode workers. */
  sync(stats: RouterStats): void {
    const m = this.#sink;
    if (m === undefined) return;
    syncAborts(this.#mirror, m, stats.abortsByState);
    for (const e of this.#registry.entries) {
      if (e.role !== 'decode' || e.address === undefined) continue;
      const key = `${e.url}|${e.address}`; // a restarted worker counts from zero again
      m.addTransferBytes(this.#mirror.delta(`bytes:${key}`, e.totals.transferBytes));
      for (let i = this.#mirror.delta(`checksums:${key}`, e.totals.checksumFailures); i > 0; i--)
        m.countChecksumFailure();
    }
  }
}
