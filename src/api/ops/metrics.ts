// Prometheus metrics of one API server, in its own prom-client Registry (never the global
// default one, so several servers in one process, e.g. in tests, do not mix). Back-end gauges
// are refreshed from Backend.stats() at scrape time; per-tenant series (requests, tokens, queue
// time, 429s) name at most MAX_NAMED_TENANTS tenants, and only the admin key sees them when the
// server has API keys (withoutTenantSeries: a tenant must not learn who else uses the server or how
// much). Must never read a clock itself: latencies arrive as seconds measured with the server's
// injected clock.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { PAGE_STATES } from '../../core/index.js';
import type { BackendStats } from '../backend.js';
import type { ApiErrorCode } from '../http/errors.js';

/** How a generate request ended: `success`, `aborted` (also client disconnects), or its error code. */
export type Outcome = 'success' | ApiErrorCode;

/** How one back-end request of a tenant ended (rate-limit.ts counts them). */
export type TenantOutcome = 'finished' | 'failed' | 'aborted' | 'rate_limited';

/** Which of a key's limits refused a request. */
export type LimitName = 'requests_per_minute' | 'tokens_per_minute' | 'max_concurrent_requests';

/**
 * Tenants named in per-tenant series; later ones share OTHER_TENANTS, so a server with
 * thousands of tenants keeps a bounded number of series.
 */
export const MAX_NAMED_TENANTS = 64;
export const OTHER_TENANTS = '(other)';

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
  readonly #tenantRequests: Counter<'tenant' | 'outcome'>;
  readonly #tenantTokens: Counter<'tenant' | 'kind'>;
  readonly #tenantWait: Histogram<'tenant'>;
  readonly #tenantLimited: Counter<'tenant' | 'limit'>;
  readonly #specDrafted: Counter;
  readonly #specAccepted: Counter;
  /** The tenants with their own label, first come (at most MAX_NAMED_TENANTS). */
  readonly #named = new Set<string>();

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
    this.#specDrafted = new Counter({
      name: 'tessera_spec_draft_tokens_total',
      help: 'Speculative decoding: draft tokens verified (prompt lookup).',
      registers,
    });
    this.#specAccepted = new Counter({
      name: 'tessera_spec_accepted_tokens_total',
      help: 'Speculative decoding: draft tokens accepted (acceptance rate = this / tessera_spec_draft_tokens_total).',
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
    this.#tenantRequests = new Counter({
      name: 'tessera_tenant_requests_total',
      help: `Back-end requests (one per choice) per tenant by how they ended; tenants past the first ${MAX_NAMED_TENANTS} are "${OTHER_TENANTS}".`,
      labelNames: ['tenant', 'outcome'],
      registers,
    });
    this.#tenantTokens = new Counter({
      name: 'tessera_tenant_tokens_total',
      help: 'Tokens per tenant: prompt tokens at admission, completion tokens as generated.',
      labelNames: ['tenant', 'kind'],
      registers,
    });
    this.#tenantWait = new Histogram({
      name: 'tessera_tenant_queue_seconds',
      help: "From handing a request to the back end to its first token, per tenant: the scheduler's queue and the prefill.",
      labelNames: ['tenant'],
      buckets: TTFT_BUCKETS,
      registers,
    });
    this.#tenantLimited = new Counter({
      name: 'tessera_tenant_rate_limited_total',
      help: "Requests answered 429 by their key's limits, per tenant and limit.",
      labelNames: ['tenant', 'limit'],
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

  countTenantRequest(tenant: string, outcome: TenantOutcome): void {
    this.#tenantRequests.inc({ tenant: this.#label(tenant), outcome });
  }

  countTenantTokens(tenant: string, kind: 'prompt' | 'completion', numTokens: number): void {
    if (numTokens > 0) this.#tenantTokens.inc({ tenant: this.#label(tenant), kind }, numTokens);
  }

  observeTenantQueue(tenant: string, seconds: number): void {
    this.#tenantWait.observe({ tenant: this.#label(tenant) }, seconds);
  }

  countTenantRateLimited(tenant: string, limit: LimitName): void {
    this.#tenantLimited.inc({ tenant: this.#label(tenant), limit });
  }

  /** The tenant's own label while fewer than MAX_NAMED_TENANTS have one, else OTHER_TENANTS. */
  #label(tenant: string): string {
    if (this.#named.has(tenant)) return tenant;
    if (this.#named.size >= MAX_NAMED_TENANTS) return OTHER_TENANTS;
    this.#named.add(tenant);
    return tenant;
  }

  /** The Prometheus text, with back-end gauges from `stats` (taken just now). */
  async render(stats: BackendStats): Promise<{ readonly contentType: string; readonly text: string }> {
    for (const state of PAGE_STATES) this.#kvPages.set({ state }, stats.kvPages[state]);
    this.#running.set(stats.requestsRunning);
    this.#waiting.set(stats.requestsWaiting);
    // A cumulative count kept by the back end: mirror it (a counter only goes up, as it does).
    this.#tagMismatches.reset();
    this.#tagMismatches.inc(stats.tagMismatchesTotal);
    this.#specDrafted.reset();
    this.#specDrafted.inc(stats.specDraftTokensTotal ?? 0);
    this.#specAccepted.reset();
    this.#specAccepted.inc(stats.specAcceptedTokensTotal ?? 0);
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}

/** Prometheus text without the per-tenant series (their HELP, TYPE and samples): what a caller who is not the admin sees. */
export function withoutTenantSeries(text: string): string {
  return text
    .split('\n')
    .filter((line) => !/^(# (HELP|TYPE) )?tessera_tenant_/.test(line))
    .join('\n');
}
