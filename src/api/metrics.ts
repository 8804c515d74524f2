// Prometheus metrics of one API server, in its own prom-client Registry (never the global
// default one, so several servers in one process, e.g. in tests, do not mix). Back-end gauges
// are refreshed from Backend.stats() at scrape time. Must never read a clock itself: latencies
// arrive as seconds measured with the server's injected clock.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { PAGE_STATES } from '../core/index.js';
import type { BackendStats } from './backend.js';
import type { ApiErrorCode } from './errors.js';

/** How a generate request ended: `success`, `aborted` (also client disconnects), or its error code. */
export type Outcome = 'success' | ApiErrorCode;

/** Registers extra series (e.g. the PD router's transfer metrics) in the server's registry. */
export type MetricsHook = (registry: Registry) => void;

// vLLM's buckets, extended downwards for small models and upwards for slow CPU decoding.
const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640,
];
const ITL_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 10, 20, 40, 80,
];
const E2E_BUCKETS = [
  0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680,
];

export class ApiMetrics {
  readonly registry = new Registry();
  readonly #requests: Counter<'outcome'>;
  readonly #kvPages: Gauge<'state'>;
  readonly #tagMismatches: Counter;
  readonly #running: Gauge;
  readonly #waiting: Gauge;
  readonly #ttft: Histogram;
  readonly #itl: Histogram;
  readonly #e2e: Histogram;

  constructor(hooks: readonly MetricsHook[] = []) {
    const registers = [this.registry];
    this.#requests = new Counter({
      name: 'tessera_requests_total',
      help: 'Generate requests by how they ended: success, aborted, or the error code.',
      labelNames: ['outcome'],
      registers,
    });
    this.#kvPages = new Gauge({
      name: 'tessera_kv_pages',
      help: 'KV pages per ledger state (summed over every pool behind this server).',
      labelNames: ['state'],
      registers,
    });
    this.#tagMismatches = new Counter({
      name: 'tessera_kv_tag_mismatches_total',
      help: 'Page reads refused because a tag or stamp did not match.',
      registers,
    });
    this.#running = new Gauge({
      name: 'tessera_requests_running',
      help: 'Requests being prefilled or decoded.',
      registers,
    });
    this.#waiting = new Gauge({
      name: 'tessera_requests_waiting',
      help: 'Requests admitted but waiting to be scheduled.',
      registers,
    });
    this.#ttft = new Histogram({
      name: 'tessera_time_to_first_token_seconds',
      help: 'From request arrival to its first generated token.',
      buckets: TTFT_BUCKETS,
      registers,
    });
    this.#itl = new Histogram({
      name: 'tessera_inter_token_latency_seconds',
      help: 'Between successive generated tokens of one request.',
      buckets: ITL_BUCKETS,
      registers,
    });
    this.#e2e = new Histogram({
      name: 'tessera_e2e_request_latency_seconds',
      help: 'From arrival to the end of a successful request.',
      buckets: E2E_BUCKETS,
      registers,
    });
    for (const outcome of ['success', 'aborted'] as const) this.#requests.inc({ outcome }, 0);
    for (const state of PAGE_STATES) this.#kvPages.set({ state }, 0);
    for (const hook of hooks) hook(this.registry);
  }

  countOutcome(outcome: Outcome): void {
    this.#requests.inc({ outcome });
  }

  observeTimeToFirstToken(seconds: number): void {
    this.#ttft.observe(seconds);
  }

  /** One gap of `seconds` that produced `numTokens` tokens: each token gets its share. */
  observeInterToken(seconds: number, numTokens: number): void {
    for (let i = 0; i < numTokens; i++) this.#itl.observe(seconds / numTokens);
  }

  observeEndToEnd(seconds: number): void {
    this.#e2e.observe(seconds);
  }

  /** The Prometheus text, with back-end gauges from `stats` (taken just now). */
  async render(stats: BackendStats): Promise<{ readonly contentType: string; readonly text: string }> {
    for (const state of PAGE_STATES) this.#kvPages.set({ state }, stats.kvPages[state]);
    this.#running.set(stats.requestsRunning);
    this.#waiting.set(stats.requestsWaiting);
    // A cumulative count kept by the back end: mirror it (a counter only goes up, as it does).
    this.#tagMismatches.reset();
    this.#tagMismatches.inc(stats.tagMismatchesTotal);
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}
