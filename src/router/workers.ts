// WorkerRegistry: the router's view of its prefill and decode workers, learned from each
// worker's GET /health (its role, cluster address, pool limits, pages, transfer totals), polled
// every pollIntervalMs and at once when its connection closes. A worker that refuses the
// connection is down at once; one that is only slow to answer (its event loop is inside a long
// model step) stays up until MAX_SLOW_POLLS polls in a row have timed out.
// Owns: per worker, whether it answers (`up`), what it last reported, and the router's own load
// on it. Must never: wait on a worker without a timeout, trust a worker whose role is not the
// one it was given as (it is `misconfigured` and never used), or throw for a worker's answer.
import { clearInterval, setInterval } from 'node:timers';
import type { PageCounts } from '../pages/index.js';
import type { WorkerLimits, WorkerRole, WorkerView } from './pair-policy.js';

export type WorkerState = 'unknown' | 'up' | 'down' | 'misconfigured';

/** Timed-out polls in a row after which an `up` worker counts as down. */
export const MAX_SLOW_POLLS = 3;

/** Cumulative transfer totals a worker reports (decode: bytes written, checksum failures). */
export interface WorkerTotals {
  readonly transferBytes: number;
  readonly checksumFailures: number;
  readonly tagMismatches: number;
}

export interface WorkerEntry {
  readonly url: string;
  readonly role: WorkerRole;
  state: WorkerState;
  address: string | undefined;
  limits: WorkerLimits | undefined;
  pages: PageCounts | undefined;
  totals: WorkerTotals;
  inFlight: number;
  lastError: string | undefined;
  /** Polls in a row that timed out (reset by any answer). */
  slowPolls: number;
  /** A poll of this worker is under way: no second one is started beside it. */
  polling: boolean;
}

/**
 * A poll that ended this much past its timeout (at least 2 s, or one more timeout) was late
 * because this process was stalled: it says nothing of the worker. (A timeout that fires on
 * time still takes some hundreds of ms longer on a loaded machine.)
 */
const ownStallMs = (fetchTimeoutMs: number): number => Math.max(2000, fetchTimeoutMs);

export interface WorkerRegistryOptions {
  readonly prefills: readonly string[];
  readonly decodes: readonly string[];
  readonly pollIntervalMs: number;
  readonly fetchTimeoutMs: number;
  /** An `up` worker stopped answering (MAX_SLOW_POLLS timed-out polls, or refused): called once per fall. */
  readonly onDown?: (address: string, why: string) => void;
}

export class WorkerRegistry {
  readonly #entries: WorkerEntry[];
  readonly #o: WorkerRegistryOptions;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(options: WorkerRegistryOptions) {
    this.#o = options;
    const entry = (url: string, role: WorkerRole): WorkerEntry => ({
      url: url.replace(/\/+$/, ''), role, state: 'unknown', address: undefined, limits: undefined, pages: undefined,
      totals: { transferBytes: 0, checksumFailures: 0, tagMismatches: 0 }, inFlight: 0, lastError: undefined, slowPolls: 0, polling: false,
    });
    this.#entries = [...options.prefills.map((u) => entry(u, 'prefill')), ...options.decodes.map((u) => entry(u, 'decode'))];
  }

  get entries(): readonly WorkerEntry[] {
    return this.#entries;
  }

  /** Polls now and then every pollIntervalMs. */
  start(): Promise<void> {
    this.#timer ??= setInterval(() => void this.pollAll(), this.#o.pollIntervalMs);
    this.#timer.unref();
    return this.pollAll();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  pollAll(): Promise<void> {
    return Promise.all(this.#entries.map((e) => this.#poll(e))).then(() => undefined);
  }

  /** The connection to `address` closed: find out at once whether its worker is still there. */
  recheck(address: string): void {
    for (const e of this.#entries) if (e.address === address) void this.#poll(e);
  }

  byAddress(address: string): WorkerEntry | undefined {
    return this.#entries.find((e) => e.address === address);
  }

  views(): WorkerView[] {
    return this.#entries.map((e) => ({
      url: e.url, role: e.role, address: e.address, up: e.state === 'up', limits: e.limits, inFlight: e.inFlight, freePages: (e.pages?.free ?? 0) + (e.pages?.cached ?? 0),
    }));
  }

  /** At least one prefill and one decode answer. */
  get ready(): boolean {
    return (['prefill', 'decode'] as const).every((role) => this.#entries.some((e) => e.role === role && e.state === 'up'));
  }

  async #poll(e: WorkerEntry): Promise<void> {
    if (e.polling) return;
    e.polling = true;
    try {
      await this.#pollOnce(e);
    } finally {
      e.polling = false;
    }
  }

  async #pollOnce(e: WorkerEntry): Promise<void> {
    let body: Record<string, unknown>;
    let status: number;
    const startedMs = performance.now();
    try {
      const response = await fetch(`${e.url}/health`, { signal: AbortSignal.timeout(this.#o.fetchTimeoutMs) });
      status = response.status;
      body = (await response.json()) as Record<string, unknown>;
    } catch (error) {
      e.lastError = `GET ${e.url}/health: ${error instanceof Error ? error.message : String(error)}`;
      // A poll that ended far past its timeout timed out because this process was busy (a long
      // tokenization, a GC), not the worker: it counts neither way, or one slow router step
      // would mark every worker down at once.
      if (performance.now() - startedMs > this.#o.fetchTimeoutMs + ownStallMs(this.#o.fetchTimeoutMs)) return;
      const wasUp = e.state === 'up';
      const slow = error instanceof Error && error.name === 'TimeoutError';
      e.slowPolls = slow ? e.slowPolls + 1 : MAX_SLOW_POLLS;
      if (e.state !== 'misconfigured' && (e.state !== 'up' || e.slowPolls >= MAX_SLOW_POLLS)) e.state = 'down';
      if (wasUp && e.state === 'down' && e.address !== undefined) this.#o.onDown?.(e.address, e.lastError);
      return;
    }
    e.slowPolls = 0;
    const report = parseReport(body, e.role);
    if (typeof report === 'string') {
      e.state = 'misconfigured';
      e.lastError = `${e.url}/health: ${report}`;
      return;
    }
    e.address = report.address;
    e.limits = report.limits;
    e.pages = report.pages;
    e.totals = report.totals;
    e.state = status === 200 ? 'up' : 'down';
    e.lastError = status === 200 ? undefined : `${e.url}/health answered ${status}`;
  }
}

interface Report {
  readonly address: string;
  readonly limits: WorkerLimits;
  readonly pages: PageCounts | undefined;
  readonly totals: WorkerTotals;
}

/** A worker's /health body, checked; a string says what is wrong with it. */
function parseReport(body: Record<string, unknown>, role: WorkerRole): Report | string {
  if (body['role'] !== role) return `it is a ${String(body['role'])} worker, but was given to the router as --${role}`;
  const num = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
  const address = body['address'];
  const contextLength = num(body['contextLength']);
  const pageSize = num(body['pageSize']);
  const numPages = num(body['kvPages']);
  const kvBytesPerToken = num(body['kvBytesPerToken']);
  const model = body['modelFingerprint'];
  if (typeof address !== 'string' || contextLength === undefined || pageSize === undefined || numPages === undefined || kvBytesPerToken === undefined || typeof model !== 'string') {
    return 'it does not report address, contextLength, pageSize, kvPages, kvBytesPerToken and modelFingerprint (is it a Tessera PD worker of this version?)';
  }
  const transfer = (body['transfer'] ?? {}) as Record<string, unknown>;
  const pages = body['pages'] as PageCounts | undefined;
  return {
    address,
    limits: { contextLength, pageSize, numPages, kvBytesPerToken, model },
    pages: typeof pages === 'object' && pages !== null ? pages : undefined,
    totals: {
      transferBytes: num(transfer['bytesWritten']) ?? 0,
      checksumFailures: num(transfer['checksumFailures']) ?? 0,
      tagMismatches: num(body['tagMismatches']) ?? 0,
    },
  };
}
