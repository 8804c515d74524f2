// createApiServer: the OpenAI-compatible HTTP server on node:http, used unchanged by
// `tessera serve` (co-located worker back end) and `tessera router` (PD router back end).
// Owns the listener, the in-flight set and graceful shutdown. Must never let one request's
// failure (a throw anywhere below) take the server down or go unanswered.
import { setMaxListeners } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AbortedError, NO_FAULTS, type FaultSet } from '../../core/index.js';
import type { GrammarEngine } from '../../grammar/index.js';
import type { ReasoningParserName } from '../openai/reasoning.js';
import type { BatchStore } from '../../batch/index.js';
import { BatchRunner, InteractiveGauge, type BatchRunnerOptions } from '../openai/batch-runner.js';
import { TenantAuth } from './auth.js';
import type { Backend, PromptCodec } from '../backend.js';
import { inlineTokenizer, type PromptTokenizer } from '../openai/prompt-tokenizer.js';
import { systemClock, type Clock } from './clock.js';
import { DASHBOARD_OFF, type DashboardAccess } from '../ops/dashboard-route.js';
import type { KvEventsAccess } from '../ops/kv-events-route.js';
import { problem, problemOf } from './errors.js';
import { DEFAULT_HTTP_LIMITS, guardHttpServer, type HttpLimits } from './http-guard.js';
import { sendProblem } from './http-io.js';
import { bodyLimitFor, longestTokenBytes, maxPromptBytes } from '../openai/prompt-bound.js';
import { ApiMetrics, type MetricsHook } from '../ops/metrics.js';
import { limitedBackend, RateLimits, type ApiKeys } from './rate-limit.js';
import { RequestIds } from './request-ids.js';
import { dispatch, type RouteContext } from './routes.js';
import { loraAdminAccess, type LoraAdminAccess } from '../openai/lora-admin-route.js';
import { answerHttpExtras } from './http-extras.js';

export const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;

export interface ApiServerOptions {
  readonly backend: Backend;
  readonly codec: PromptCodec;
  /**
   * Renders and tokenizes prompts: `offloadedTokenizer` over the tokenizer threads in every serving
   * process (src/cli starts and closes them). Default: inline, on the main thread (tests of the API).
   */
  readonly tokenizer?: PromptTokenizer;
  /** Seeds request ids and the seeds drawn for requests that give none. Vary it per process. */
  readonly seed: number;
  /** API key -> tenant, or -> tenant and limits (rate-limit.ts). Absent: no auth, every request is DEFAULT_TENANT. */
  readonly apiKeys?: ApiKeys;
  /** With apiKeys: the bearer key that sees /health's detail (--admin-key). Absent: nobody does. */
  readonly adminKey?: string;
  /** Larger bodies get 413. Default DEFAULT_MAX_BODY_BYTES. */
  readonly maxBodyBytes?: number;
  readonly clock?: Clock;
  /** Test-only fault points (`skip-admission`, `eager-stream-headers`). Default none. */
  readonly faults?: FaultSet;
  /** close(): how long in-flight requests may run on before they are aborted. Default 30 s. */
  readonly drainTimeoutMs?: number;
  /** Extra series in this server's registry (the PD router's, see metrics-pd.ts). */
  readonly metricsHooks?: readonly MetricsHook[];
  /** Idle/header/request timeouts and the connection cap (http-guard.ts). Default DEFAULT_HTTP_LIMITS. */
  readonly httpLimits?: Partial<HttpLimits>;
  /** The admin-only /dashboard: the admin key (null: off, 404) and this node's plan lines. Default off. */
  readonly dashboard?: DashboardAccess;
  /** Where unexpected errors (bugs) are reported. Default: stderr. */
  readonly logError?: (message: string, error: unknown) => void;
  /** Structured output: checks `response_format` schemas (the back end enforces them). Absent: 400. */
  readonly grammar?: GrammarEngine;
  /** Split reasoning from chat and Responses answers with this parser (reasoning.ts); absent: none. */
  readonly reasoningParser?: ReasoningParserName;
  /** The Batch API on this store (--batch-dir): /v1/files, /v1/batches, and the runner of their lines. */
  readonly batch?: { readonly store: BatchStore; readonly runner?: BatchRunnerOptions };
  /** Opt-in CORS (`--cors-origin`): the origin browsers may call from ('*' for any). Absent: no CORS headers. */
  readonly corsOrigin?: string;
  /** GET /kv-events(/stream): the node's KV event ring and who may read it (kv-events-route.ts). Absent: 404. */
  readonly kvEvents?: KvEventsAccess;
  /**
   * POST /v1/(un)load_lora_adapter: the directory and the keys (a PD worker's own registry, for the
   * admin key and the cluster secret). Absent: the back end's adapters, for the dashboard's admin key.
   */
  readonly loraAdmin?: LoraAdminAccess | null;
}

export interface ApiServer {
  /** Resolves with the bound address (port 0 picks a free one). */
  listen(port: number, host: string): Promise<{ readonly host: string; readonly port: number }>;
  /**
   * Stop accepting connections, let in-flight requests finish (new requests on open connections
   * get 503), abort those still running after drainTimeoutMs, then close every connection.
   */
  close(): Promise<void>;
  /** Requests being answered now. */
  readonly numInFlight: number;
  readonly metrics: ApiMetrics;
}

export function createApiServer(options: ApiServerOptions): ApiServer {
  return new HttpApiServer(options);
}

class HttpApiServer implements ApiServer {
  readonly metrics: ApiMetrics;
  readonly #server: Server;
  readonly #ctx: RouteContext;
  readonly #shutdown = new AbortController();
  readonly #closingSignal = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #drainTimeoutMs: number;
  readonly #logError: (message: string, error: unknown) => void;
  readonly #corsOrigin: string | undefined;
  readonly #batchRunner: BatchRunner | null;
  #closing: Promise<void> | null = null;

  constructor(options: ApiServerOptions) {
    const clock = options.clock ?? systemClock;
    this.metrics = new ApiMetrics(options.metricsHooks ?? []);
    this.#drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
    // Every request in flight listens on the shutdown signal and removes its listener when it
    // ends (generate-route.ts): many at once is the normal case, not a leak (no MaxListeners
    // warning). AbortSignal.any on it instead would keep a WeakRef per request for the server's life.
    setMaxListeners(0, this.#shutdown.signal);
    this.#corsOrigin = options.corsOrigin;
    this.#logError =
      options.logError ??
      ((message, error) =>
        process.stderr.write(
          `tessera api: ${message}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
        ));
    // The body limit follows from the context length (prompt-bound.ts), under the configured one.
    const faults = options.faults ?? NO_FAULTS;
    const unbound = faults.has('skip-prompt-bound'); // test-only: the limits as they were before the bound
    const promptBytes = maxPromptBytes(options.backend.contextLength, longestTokenBytes(options.codec));
    const bodyCeiling = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.#ctx = {
      // Every request's back-end call passes its key's limits (429) and is counted per tenant
      // (test-only skip-key-limits: counted, never limited).
      backend: limitedBackend(
        options.backend,
        new RateLimits(faults.has('skip-key-limits') ? undefined : options.apiKeys),
        clock,
        this.metrics,
      ),
      codec: options.codec,
      tokenizer: options.tokenizer ?? inlineTokenizer(options.codec),
      auth: new TenantAuth(options.apiKeys, options.adminKey),
      metrics: this.metrics,
      clock,
      ids: new RequestIds(options.seed),
      faults,
      maxBodyBytes: unbound ? bodyCeiling : bodyLimitFor(promptBytes, bodyCeiling),
      maxPromptBytes: unbound ? Number.POSITIVE_INFINITY : promptBytes,
      oversizeGraceMs: 5_000,
      shutdown: this.#shutdown.signal,
      startedUnixSeconds: clock.unixSeconds(),
      dashboard: options.dashboard ?? DASHBOARD_OFF,
      kvEvents: options.kvEvents ?? null,
      loraAdmin:
        options.loraAdmin !== undefined
          ? options.loraAdmin
          : loraAdminAccess(options.backend.adapters, [options.dashboard?.adminKey]),
      closing: this.#closingSignal.signal,
      logError: this.#logError,
      ...(options.grammar === undefined ? {} : { grammar: options.grammar }),
      ...(options.reasoningParser === undefined ? {} : { reasoningParser: options.reasoningParser }),
      batch: options.batch === undefined ? null : { store: options.batch.store, gauge: new InteractiveGauge() },
    };
    this.#batchRunner =
      options.batch === undefined || this.#ctx.batch === null
        ? null
        : new BatchRunner(options.batch.store, this.#ctx, this.#ctx.batch.gauge, options.batch.runner);
    this.#server = createServer((req, res) => this.#onRequest(req, res));
    guardHttpServer(this.#server, { ...DEFAULT_HTTP_LIMITS, ...options.httpLimits }, faults);
  }

  get numInFlight(): number {
    return this.#inFlight.size;
  }

  listen(port: number, host: string): Promise<{ host: string; port: number }> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        const address = this.#server.address() as AddressInfo;
        resolve({ host: address.address, port: address.port });
      });
    });
  }

  close(): Promise<void> {
    this.#closingSignal.abort();
    void this.#batchRunner?.close(); // its running lines end with the drain's aborts; they run again after a restart
    this.#closing ??= this.#drainAndClose();
    return this.#closing;
  }

  #onRequest(req: IncomingMessage, res: ServerResponse): void {
    if (answerHttpExtras(req, res, this.#corsOrigin, () => this.#ctx.ids.nextRid())) return;
    if (this.#closing !== null) {
      sendProblem(res, problem('overloaded', 'The server is shutting down.'), { connection: 'close' });
      return;
    }
    const task = dispatch(req, res, this.#ctx).catch((error: unknown) => {
      // A bug below (or a failing back-end health/stats call): answer it, keep serving.
      this.#logError(`${req.method ?? '?'} ${req.url ?? '?'} failed`, error);
      if (!res.writableEnded) sendProblem(res, problemOf(error));
    });
    this.#inFlight.add(task);
    void task.finally(() => this.#inFlight.delete(task));
  }

  async #drainAndClose(): Promise<void> {
    const listening = this.#server.listening;
    const closed = listening ? new Promise<void>((resolve) => this.#server.close(() => resolve())) : Promise.resolve();
    this.#server.closeIdleConnections();
    if (!(await this.#waitForInFlight(this.#drainTimeoutMs))) {
      this.#shutdown.abort(new AbortedError('server shutting down'));
      await this.#waitForInFlight(5_000);
    }
    this.#server.closeAllConnections();
    await closed;
  }

  /** True when every in-flight request ended within `timeoutMs`. */
  async #waitForInFlight(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const drained = (async (): Promise<true> => {
      while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
      return true;
    })();
    try {
      return await Promise.race([drained, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
