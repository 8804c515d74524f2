// The health, stats and metrics contracts every back end and PD role shares: the co-located
// worker, the prefill and decode workers and the PD router produce them, src/api reads them.
// Declared once here, the lowest layer all of them may import.
// Must never: hold state other than TotalsMirror's own (one per consumer, never module-level).

/** Every state a page can be in. Metrics publish one series per state, `free` included. */
export const PAGE_STATES = ['free', 'allocated', 'cached', 'quarantined'] as const;
export type PageState = (typeof PAGE_STATES)[number];
export type PageCounts = Record<PageState, number>;

/** A back end's or a role's /health. */
export interface BackendHealth {
  /** False makes /health answer 503. */
  readonly healthy: boolean;
  /** Shown as-is in the /health body (e.g. the router's workers and their state). */
  readonly detail: Readonly<Record<string, unknown>>;
}

/** A snapshot for /metrics, taken at scrape time. */
export interface BackendStats {
  /** Pages per ledger state, summed over every pool behind this back end. */
  readonly kvPages: Readonly<PageCounts>;
  readonly requestsRunning: number;
  readonly requestsWaiting: number;
  /** Cumulative count of failed tag/stamp checks (reads refused). Never decreases. */
  readonly tagMismatchesTotal: number;
  /** Speculative decoding: draft tokens verified, and those accepted, so far (absent: the back end does not speculate). */
  readonly specDraftTokensTotal?: number;
  readonly specAcceptedTokensTotal?: number;
}

/** The PD series of /metrics (src/api's pdMetrics implements it), fed by the workers and the router. */
export interface PdMetricsSink {
  /** KV bytes received by decode (after checksum verification or not: count what moved). */
  addTransferBytes(numBytes: number): void;
  /** One whole transfer, from Prefill sent to KvDone verified. */
  observeTransferSeconds(seconds: number): void;
  /** One frame (or final digest) whose checksum failed. */
  countChecksumFailure(): void;
  /** One request aborted, by the protocol phase it was in (e.g. `reserving`, `transferring`, `decoding`). */
  countAbort(phase: string): void;
  /** How long a request waited for room on the cluster (the router's wait queue), until its first token. */
  observeQueueWaitSeconds(seconds: number): void;
}

/**
 * Mirrors cumulative totals (a machine's stats, a worker's reported totals) into counters that
 * only go up: each sync adds what grew since the last one.
 */
export class TotalsMirror {
  readonly #seen = new Map<string, number>();

  /** The growth of `key` since the last call (0 the first time it is 0). */
  delta(key: string, total: number): number {
    const before = this.#seen.get(key) ?? 0;
    this.#seen.set(key, total);
    return Math.max(0, total - before);
  }
}

/** Aborts by phase: a machine's abortsByState, phase names lowercased, into the sink. */
export function syncAborts(
  mirror: TotalsMirror,
  sink: PdMetricsSink,
  abortsByState: Readonly<Record<string, number>>,
): void {
  for (const [state, total] of Object.entries(abortsByState)) {
    const grew = mirror.delta(`abort:${state}`, total);
    for (let i = 0; i < grew; i++) sink.countAbort(state.toLowerCase());
  }
}
