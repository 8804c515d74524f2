// RouterLoad: what the router counts about its own attempts: the load it puts on each worker
// (for the pair policy), its attempts by state (for /health), and the PD series of its /metrics
// (transfer time from Prefill sent to the first token, aborts by phase, and the cluster's
// transfer bytes and checksum failures as its decode workers report them).
// Learns attempts from the machine's own trace events (a tee in front of the trace sink) and
// the messages it sends, so the machine needs no extra outputs.
// Must never: change what the machine decides; count a worker's totals twice.
import type { RequestId } from '../core/index.js';
import type { Message, PeerId, RouterStats, TraceEvent, TraceSink } from '../transfer/index.js';
import type { WorkerRegistry } from './workers.js';

/** src/api's PdMetrics, structurally. */
export interface RouterMetricsSink {
  addTransferBytes(numBytes: number): void;
  observeTransferSeconds(seconds: number): void;
  countChecksumFailure(): void;
  countAbort(phase: string): void;
  /** How long a request waited for room on the cluster (wait-queue.ts), until its first token. */
  observeQueueWaitSeconds(seconds: number): void;
}

interface Attempt {
  readonly prefill: PeerId;
  readonly decode: PeerId;
  state: string;
}

export class RouterLoad {
  readonly #registry: WorkerRegistry;
  readonly #attempts = new Map<string, Attempt>();
  /** Client rid -> when its (latest) Prefill was sent, until its first tokens. */
  readonly #prefillSentMs = new Map<string, number>();
  readonly #seen = new Map<string, number>();
  #metrics: RouterMetricsSink | undefined;

  constructor(registry: WorkerRegistry) {
    this.#registry = registry;
  }

  attachMetrics(sink: RouterMetricsSink): void {
    this.#metrics = sink;
  }

  /** The machine's trace, passed on to `next`; attempt ends give their load back. */
  tee(next: TraceSink): TraceSink {
    return { emit: (event) => (this.#onEvent(event), next.emit(event)) };
  }

  onSend(to: PeerId, message: Message): void {
    if (message.type === 'Reserve') {
      this.#attempts.set(message.rid, { prefill: message.prefillAddress, decode: to, state: 'Reserving' });
      this.#adjust(message.prefillAddress, +1);
      this.#adjust(to, +1);
    } else if (message.type === 'Prefill') {
      this.#prefillSentMs.set(clientRidOf(message.rid), Date.now());
    }
  }

  observeQueueWait(seconds: number): void {
    this.#metrics?.observeQueueWaitSeconds(seconds);
  }

  onFirstTokens(clientRid: RequestId): void {
    const sent = this.#prefillSentMs.get(clientRid);
    if (sent === undefined) return;
    this.#prefillSentMs.delete(clientRid);
    this.#metrics?.observeTransferSeconds((Date.now() - sent) / 1000);
  }

  attemptsByState(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const a of this.#attempts.values()) counts[a.state] = (counts[a.state] ?? 0) + 1;
    return counts;
  }

  /** Scrape time: aborts by phase from the machine, bytes and checksum failures from the decode workers. */
  syncMetrics(stats: RouterStats): void {
    const m = this.#metrics;
    if (m === undefined) return;
    for (const [state, total] of Object.entries(stats.abortsByState)) {
      for (let i = this.#delta(`abort:${state}`, total); i > 0; i--) m.countAbort(state.toLowerCase());
    }
    for (const e of this.#registry.entries) {
      if (e.role !== 'decode' || e.address === undefined) continue;
      const key = `${e.url}|${e.address}`; // a restarted worker counts from zero again
      m.addTransferBytes(this.#delta(`bytes:${key}`, e.totals.transferBytes));
      for (let i = this.#delta(`checksums:${key}`, e.totals.checksumFailures); i > 0; i--) m.countChecksumFailure();
    }
  }

  #onEvent(event: TraceEvent): void {
    if (event.kind !== 'state') return;
    const a = this.#attempts.get(event.rid);
    if (a === undefined) return;
    a.state = event.to;
    if (event.to !== 'Succeeded' && event.to !== 'Failed') return;
    this.#attempts.delete(event.rid);
    this.#adjust(a.prefill, -1);
    this.#adjust(a.decode, -1);
    this.#prefillSentMs.delete(clientRidOf(event.rid));
  }

  #adjust(address: PeerId, by: number): void {
    const e = this.#registry.byAddress(address);
    if (e !== undefined) e.inFlight = Math.max(0, e.inFlight + by);
  }

  #delta(key: string, total: number): number {
    const before = this.#seen.get(key) ?? 0;
    this.#seen.set(key, total);
    return Math.max(0, total - before);
  }
}

/** The machine names attempt n > 1 of client request r "r.n". */
function clientRidOf(attemptRid: string): string {
  const match = /^(.*)\.\d+$/.exec(attemptRid);
  return match === null ? attemptRid : (match[1] as string);
}
