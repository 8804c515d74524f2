// Per-key limits (the keys file's object form, src/cli/config-api-keys.ts) and the back end
// that enforces them, with the per-tenant metrics of what it let through.
// Owns: the limits' meters (requests and tokens per minute as token buckets that refill
// continuously, as OpenAI's do; concurrent requests as a count), the 429 they answer
// (RateLimitError -> `rate_limit_exceeded`, `rate_limit_error`, with Retry-After), and counting
// each tenant's requests, tokens and queue time into ApiMetrics.
// Must never: read a clock (the server's Clock is passed in), refuse a request after its first
// token (a limit is checked once, before the back end sees the request; completion tokens
// generated later only drain the bucket for later requests), or let a meter outlive its key
// set (one meter per tenant with limits: bounded by the keys file).
//
// Life of a back-end request here (serve and router alike: createApiServer wraps its Backend):
//   1. generate(request): its tenant's meter checks concurrency, then requests per minute, then
//      the prompt's tokens per minute; the first that fails throws RateLimitError (the route
//      answers 429 before any byte of a stream) and nothing is taken from any bucket;
//   2. admitted: one request and the prompt's tokens are taken, one more in flight;
//   3. each `tokens` event drains its completion tokens from the bucket (it may go below zero:
//      later requests wait until it refills), and the first one is the tenant's queue time;
//   4. the end, however it comes (finished, failed, aborted by the client): one less in flight.
// The limits of a key are its tenant's: every key of a tenant shares one meter (the request
// carries its tenant, not its key), so the keys file must give a tenant's keys one set of limits.
import type { GenerateEvent, GenerateRequest, TenantId } from '../../core/index.js';
import type { Backend } from '../backend.js';
import type { Clock } from './clock.js';
import { RateLimitError } from './errors.js';
import type { ApiMetrics, LimitName } from '../ops/metrics.js';

export interface KeyLimits {
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
  readonly maxConcurrentRequests?: number;
}

/** One key of the keys file: its tenant, and the limits of that tenant. */
export interface ApiKeySpec {
  readonly tenant: TenantId;
  readonly limits: KeyLimits;
}

/** The keys file as the server takes it: key -> tenant (no limits) or key -> spec. */
export type ApiKeys = ReadonlyMap<string, TenantId | ApiKeySpec>;

export const specOf = (entry: TenantId | ApiKeySpec): ApiKeySpec =>
  typeof entry === 'string' ? { tenant: entry, limits: {} } : entry;

/** A token bucket of `perMinute`, full at the start, refilled continuously. */
class Bucket {
  readonly #capacity: number;
  #level: number;
  #atMs: number;

  constructor(perMinute: number, nowMs: number) {
    this.#capacity = perMinute;
    this.#level = perMinute;
    this.#atMs = nowMs;
  }

  get capacity(): number {
    return this.#capacity;
  }

  /** Seconds until `n` can be taken (0: now); Infinity when n is more than the bucket holds. */
  waitSeconds(n: number, nowMs: number): number {
    this.#refill(nowMs);
    if (n > this.#capacity) return Infinity;
    if (this.#level >= n) return 0;
    return Math.max(1, Math.ceil(((n - this.#level) * 60) / this.#capacity));
  }

  take(n: number, nowMs: number): void {
    this.#refill(nowMs);
    this.#level -= n;
  }

  #refill(nowMs: number): void {
    const elapsedMs = Math.max(0, nowMs - this.#atMs);
    this.#level = Math.min(this.#capacity, this.#level + (elapsedMs * this.#capacity) / 60_000);
    this.#atMs = nowMs;
  }
}

interface Meter {
  readonly requests: Bucket | undefined;
  readonly tokens: Bucket | undefined;
  readonly maxConcurrent: number | undefined;
  inFlight: number;
}

export type Admission =
  | { readonly kind: 'admitted' }
  | { readonly kind: 'refused'; readonly limit: LimitName; readonly error: RateLimitError };

/** Every tenant's meter. Pure: time is an argument. */
export class RateLimits {
  readonly #limits = new Map<TenantId, KeyLimits>();
  readonly #meters = new Map<TenantId, Meter>();

  /** `keys` as parsed (config-api-keys.ts checks that a tenant's keys agree); undefined: no limits. */
  constructor(keys: ApiKeys | undefined) {
    for (const entry of keys?.values() ?? []) {
      const { tenant, limits } = specOf(entry);
      if (Object.keys(limits).length > 0) this.#limits.set(tenant, limits);
    }
  }

  get enabled(): boolean {
    return this.#limits.size > 0;
  }

  /** Step 1 and 2 above: all checks first, then everything is taken, or nothing. */
  admit(tenant: TenantId, numPromptTokens: number, nowMs: number): Admission {
    const meter = this.#meterOf(tenant, nowMs);
    if (meter === undefined) return { kind: 'admitted' };
    const refuse = (limit: LimitName, message: string, seconds: number): Admission => ({
      kind: 'refused',
      limit,
      error: new RateLimitError(message, seconds),
    });
    if (meter.maxConcurrent !== undefined && meter.inFlight >= meter.maxConcurrent) {
      return refuse(
        'max_concurrent_requests',
        `Rate limit reached: ${meter.inFlight} requests of this key are in flight, ` +
          `the limit is ${meter.maxConcurrent} (max_concurrent_requests). Retry when one ends.`,
        1,
      );
    }
    const requestWait = meter.requests?.waitSeconds(1, nowMs) ?? 0;
    if (requestWait > 0) {
      return refuse(
        'requests_per_minute',
        `Rate limit reached for requests: this key's limit is ${meter.requests?.capacity} requests per minute. Please retry after ${requestWait} s.`,
        requestWait,
      );
    }
    const tokenWait = meter.tokens?.waitSeconds(numPromptTokens, nowMs) ?? 0;
    if (tokenWait === Infinity) {
      return refuse(
        'tokens_per_minute',
        `Request too large: its prompt has ${numPromptTokens} tokens, more than this key's limit of ` +
          `${meter.tokens?.capacity} tokens per minute; it can never be admitted as it is.`,
        60,
      );
    }
    if (tokenWait > 0) {
      return refuse(
        'tokens_per_minute',
        `Rate limit reached for tokens: this key's limit is ${meter.tokens?.capacity} tokens per minute ` +
          `(prompt tokens at admission, completion tokens as generated). Please retry after ${tokenWait} s.`,
        tokenWait,
      );
    }
    meter.requests?.take(1, nowMs);
    meter.tokens?.take(numPromptTokens, nowMs);
    meter.inFlight++;
    return { kind: 'admitted' };
  }

  /** Step 3: completion tokens as they are generated. */
  chargeCompletion(tenant: TenantId, numTokens: number, nowMs: number): void {
    this.#meters.get(tenant)?.tokens?.take(numTokens, nowMs);
  }

  /** Step 4. */
  release(tenant: TenantId): void {
    const meter = this.#meters.get(tenant);
    if (meter !== undefined) meter.inFlight = Math.max(0, meter.inFlight - 1);
  }

  #meterOf(tenant: TenantId, nowMs: number): Meter | undefined {
    const limits = this.#limits.get(tenant);
    if (limits === undefined) return undefined;
    let meter = this.#meters.get(tenant);
    if (meter === undefined) {
      const bucket = (perMinute: number | undefined): Bucket | undefined =>
        perMinute === undefined ? undefined : new Bucket(perMinute, nowMs);
      meter = {
        requests: bucket(limits.requestsPerMinute),
        tokens: bucket(limits.tokensPerMinute),
        maxConcurrent: limits.maxConcurrentRequests,
        inFlight: 0,
      };
      this.#meters.set(tenant, meter);
    }
    return meter;
  }
}

/** `backend` behind the limits, counting every tenant's requests, tokens and queue time. */
export function limitedBackend(backend: Backend, limits: RateLimits, clock: Clock, metrics: ApiMetrics): Backend {
  async function* generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
    const { tenant } = request;
    const startMs = clock.nowMs();
    const admission = limits.admit(tenant, request.promptTokens.length, startMs);
    if (admission.kind === 'refused') {
      metrics.countTenantRateLimited(tenant, admission.limit);
      metrics.countTenantRequest(tenant, 'rate_limited');
      throw admission.error;
    }
    metrics.countTenantTokens(tenant, 'prompt', request.promptTokens.length);
    let outcome: 'finished' | 'failed' | 'aborted' = 'aborted';
    let first = true;
    try {
      for await (const event of backend.generate(request, signal)) {
        if (event.type === 'tokens') {
          const nowMs = clock.nowMs();
          if (first) metrics.observeTenantQueue(tenant, (nowMs - startMs) / 1000);
          first = false;
          limits.chargeCompletion(tenant, event.ids.length, nowMs);
          metrics.countTenantTokens(tenant, 'completion', event.ids.length);
        } else outcome = event.type;
        yield event;
      }
    } catch (error) {
      outcome = 'failed';
      throw error;
    } finally {
      limits.release(tenant);
      metrics.countTenantRequest(tenant, outcome);
    }
  }
  return {
    modelName: backend.modelName,
    root: backend.root,
    contextLength: backend.contextLength,
    ...(backend.embeddings === true ? { embeddings: true } : {}),
    ...(backend.adapters === undefined ? {} : { adapters: backend.adapters }),
    generate,
    health: () => backend.health(),
    stats: () => backend.stats(),
    pageMap: () => backend.pageMap(),
  };
}
