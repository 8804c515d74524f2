// WorkerRegistry: the router's view of its prefill and decode workers, learned from each
// worker's GET /health (its role, cluster address, pool limits, pages, transfer totals), polled
// every pollIntervalMs and at once when its connection closes. A worker that refuses the
// connection is down at once; one that is only slow to answer (its event loop is inside a long
// model step) stays up until MAX_SLOW_POLLS polls in a row have timed out.
// Owns: per worker, whether it answers (`up`), what it last reported, and the router's own load
// on it. Every worker, static or joined (add: from DNS), is used only once `vet` passed. The
// static ones are vetted together after the first poll of all of them: the layout most of them
// report (model fingerprint, page size, bytes per token; a tie goes to the one listed first) is
// vetted first, so one wrong worker listed first cannot lock out the rest. Workers leave (drain: no new
// pairs; removed once the router has nothing in flight on it). Must never: wait on a worker without a timeout, trust a worker whose role is not the
// one it was given as (it is `misconfigured` and never used), or throw for a worker's answer.
import { clearInterval, setInterval } from 'node:timers';
import { KV_DTYPES, NO_FAULTS, type FaultSet, type PageCounts } from '../core/index.js';
import type { WorkerLimits, WorkerRole, WorkerView } from './pair-policy.js';
import { parsePrefixReport, type PrefixView } from './prefix-index.js';

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
  lastError: string | undefined;
  /** Polls in a row that timed out (reset by any answer). */
  slowPolls: number;
  /** A poll of this worker is under way: no second one is started beside it. */
  polling: boolean;
  /** Given as a URL at start, or found by DNS (router/discovery.ts). */
  readonly source: 'static' | 'dns';
  /** Passed the join checks (`vet`); without a `vet`, static workers are admitted from the start. */
  admitted: boolean;
  /** Leaving: no new pairs; removed once nothing is in flight on it. */
  draining: boolean;
  /** A prefill's last report of its prefix cache (prefix-index.ts). */
  prefix: PrefixView | undefined;
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
  /** Test-only: `count-stalled-polls` counts the polls a stall of this process made late. Default none. */
  readonly faults?: FaultSet;
  /** The router machine's count of live attempts on a worker (the load the pair policy balances). */
  readonly inFlightOn?: (address: string) => number;
  /** The join checks of every worker (static or added), after each answer until it passes: why not, or undefined. */
  readonly vet?: (entry: WorkerEntry, admitted: readonly WorkerEntry[]) => Promise<string | undefined>;
  /** An `up` worker stopped answering (MAX_SLOW_POLLS timed-out polls, or refused): called once per fall. */
  readonly onDown?: (entry: WorkerEntry) => void;
  /** A drained worker left the registry. */
  readonly onRemoved?: (entry: WorkerEntry) => void;
}

export class WorkerRegistry {
  readonly #entries: WorkerEntry[];
  readonly #o: WorkerRegistryOptions;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Until the first poll of every static worker is in, their join checks wait (see #vetStatic). */
  #staticVetted = false;
  /** The poll under way of each worker (at most one at a time). */
  readonly #polls = new Map<WorkerEntry, Promise<void>>();
  #staticVetting = false;

  constructor(options: WorkerRegistryOptions) {
    this.#o = options;
    const admitted = options.vet === undefined;
    this.#entries = [
      ...options.prefills.map((u) => newEntry(u, 'prefill', 'static', admitted)),
      ...options.decodes.map((u) => newEntry(u, 'decode', 'static', admitted)),
    ];
  }

  /** A worker that joined (DNS): polled at once, paired only once its join checks pass. A draining one comes back. */
  add(url: string, role: WorkerRole): WorkerEntry {
    const known = this.#entries.find((e) => e.url === url.replace(/\/+$/, '') && e.role === role);
    if (known !== undefined) {
      known.draining = false;
      return known;
    }
    const e = newEntry(url, role, 'dns', false);
    this.#entries.push(e);
    void this.#poll(e);
    return e;
  }

  /** A worker that left (DNS): no new pairs from now on; removed once nothing is in flight on it. */
  drain(url: string): void {
    for (const e of this.#entries) if (e.url === url.replace(/\/+$/, '') && e.source === 'dns') e.draining = true;
    this.#removeDrained();
  }

  /** The router's live attempts on this worker now. */
  inFlight(e: WorkerEntry): number {
    return e.address === undefined ? 0 : (this.#o.inFlightOn?.(e.address) ?? 0);
  }

  #removeDrained(): void {
    for (const e of this.#entries.filter((x) => x.draining && this.inFlight(x) === 0)) {
      this.#entries.splice(this.#entries.indexOf(e), 1);
      this.#o.onRemoved?.(e);
    }
  }

  get entries(): readonly WorkerEntry[] {
    return this.#entries;
  }

  /** Polls now and then every pollIntervalMs; the static workers that answered are vetted once all have. */
  async start(): Promise<void> {
    this.#timer ??= setInterval(() => void this.pollAll(), this.#o.pollIntervalMs);
    this.#timer.unref();
    await this.pollAll();
    await this.#vetStatic();
  }

  /**
   * The first join checks of the static workers that answered, in the order that makes the most
   * common layout the reference: its workers first (in the order given), then the rest, each
   * checked against those admitted before it.
   */
  async #vetStatic(): Promise<void> {
    if (this.#staticVetting) return;
    this.#staticVetting = true;
    const answered = this.#entries.filter((e) => e.source === 'static' && !e.admitted && e.limits !== undefined);
    const key = (e: WorkerEntry): string => {
      const l = e.limits as WorkerLimits;
      return `${l.model}/${l.pageSize}/${l.kvBytesPerToken}`;
    };
    const count = new Map<string, number>();
    for (const e of answered) count.set(key(e), (count.get(key(e)) ?? 0) + 1);
    const most = Math.max(0, ...count.values());
    const reference = answered.find((e) => count.get(key(e)) === most);
    const ordered = [
      ...answered.filter((e) => reference !== undefined && key(e) === key(reference)),
      ...answered.filter((e) => reference === undefined || key(e) !== key(reference)),
    ];
    for (const e of ordered) if (e.state === 'up' || e.state === 'unknown') await this.#vet(e);
    this.#staticVetted = true; // from now on, each is vetted after its own answer (one down at start: when it answers)
  }

  /** Runs the join checks of `e` against every admitted worker: admitted, or misconfigured with the reason. */
  async #vet(e: WorkerEntry): Promise<boolean> {
    if (e.admitted || this.#o.vet === undefined) return true;
    const why = await this.#o.vet(
      e,
      this.#entries.filter((x) => x !== e && x.admitted && x.limits !== undefined),
    );
    if (why !== undefined) {
      e.state = 'misconfigured';
      e.lastError = `not admitted: ${why}`;
      return false;
    }
    e.admitted = true;
    e.state = 'up';
    e.lastError = undefined;
    return true;
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  pollAll(): Promise<void> {
    this.#removeDrained();
    return Promise.all(this.#entries.map((e) => this.#poll(e))).then(() => undefined);
  }

  /** The connection to `address` closed: find out at once whether its worker is still there. */
  recheck(address: string): void {
    for (const e of this.#entries) if (e.address === address) void this.#poll(e);
  }

  byAddress(address: string): WorkerEntry | undefined {
    return this.#entries.find((e) => e.address === address);
  }

  /** Each worker as the pair policy sees it; `inFlight` is the router machine's count of its attempts there. */
  views(): WorkerView[] {
    return this.#entries.map((e) => ({
      url: e.url,
      role: e.role,
      address: e.address,
      up: usable(e),
      limits: e.limits,
      inFlight: this.inFlight(e),
      freePages: (e.pages?.free ?? 0) + (e.pages?.cached ?? 0),
    }));
  }

  /**
   * Why no request can be served until a worker comes back or joins, or undefined: a role whose
   * workers were all polled and all failed (refused, timed out, answered unhealthy, or are
   * misconfigured). Not while one of them is up or not yet polled, nor for a role with no worker
   * yet (DNS may add one). Requests then fail at once instead of waiting for room (PdRouter).
   */
  unavailable(): string | undefined {
    for (const role of ['prefill', 'decode'] as const) {
      const of = this.#entries.filter((e) => e.role === role);
      if (of.length === 0 || of.some((e) => e.state === 'up' || e.state === 'unknown')) continue;
      const why = of.map((e) => `${e.url}: ${e.state}${e.lastError === undefined ? '' : `, ${e.lastError}`}`);
      return `no ${role} worker is up (${why.join('; ')})`;
    }
    return undefined;
  }

  /** At least one prefill and one decode answer. */
  get ready(): boolean {
    return (['prefill', 'decode'] as const).every((role) => this.#entries.some((e) => e.role === role && usable(e)));
  }

  /** An `up` worker stopped answering: it is checked again before it is paired again (what answers next may be another process). */
  #fell(e: WorkerEntry): void {
    e.state = 'down';
    if (this.#o.vet !== undefined) e.admitted = false;
    this.#o.onDown?.(e);
  }

  /**
   * Every worker polled again, each after the poll already under way (whose answer may predate a
   * change the caller just made, such as a hot-loaded LoRA adapter): resolves once all answered.
   */
  async refresh(): Promise<void> {
    await Promise.all(
      this.#entries.map(async (e) => {
        await this.#polls.get(e);
        await this.#poll(e);
      }),
    );
  }

  #poll(e: WorkerEntry): Promise<void> {
    const running = this.#polls.get(e);
    if (running !== undefined) return running;
    e.polling = true;
    const poll = this.#pollOnce(e).finally(() => {
      e.polling = false;
      this.#polls.delete(e);
    });
    this.#polls.set(e, poll);
    return poll;
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
      const late = performance.now() - startedMs > this.#o.fetchTimeoutMs + ownStallMs(this.#o.fetchTimeoutMs);
      if (late && !(this.#o.faults ?? NO_FAULTS).has('count-stalled-polls')) return;
      const slow = error instanceof Error && error.name === 'TimeoutError';
      e.slowPolls = slow ? e.slowPolls + 1 : MAX_SLOW_POLLS;
      const wasUp = e.state === 'up';
      if (e.state !== 'misconfigured' && (e.state !== 'up' || e.slowPolls >= MAX_SLOW_POLLS)) e.state = 'down';
      if (wasUp && e.state === 'down') this.#fell(e);
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
    e.prefix = parsePrefixReport(body['prefixCache']);
    // A static worker's first checks wait for the others' first answers (#vetStatic).
    if (status === 200 && !e.admitted && (e.source === 'dns' || this.#staticVetted) && !(await this.#vet(e))) return;
    // A static worker that answered before the join checks of all of them ran is not `up` yet.
    if (status !== 200 && e.state === 'up') this.#fell(e);
    e.state = status !== 200 ? 'down' : e.admitted ? 'up' : 'unknown';
    e.lastError = status === 200 ? undefined : `${e.url}/health answered ${status}`;
  }
}

const usable = (e: WorkerEntry): boolean => e.state === 'up' && e.admitted && !e.draining;

function newEntry(url: string, role: WorkerRole, source: 'static' | 'dns', admitted: boolean): WorkerEntry {
  return {
    url: url.replace(/\/+$/, ''),
    role,
    state: 'unknown',
    address: undefined,
    limits: undefined,
    pages: undefined,
    totals: { transferBytes: 0, checksumFailures: 0, tagMismatches: 0 },
    lastError: undefined,
    slowPolls: 0,
    polling: false,
    source,
    admitted,
    draining: false,
    prefix: undefined,
  };
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
  const num = (value: unknown): number | undefined =>
    typeof value === 'number' && Number.isFinite(value) ? value : undefined;
  const address = body['address'];
  const contextLength = num(body['contextLength']);
  const pageSize = num(body['pageSize']);
  const numPages = num(body['kvPages']);
  const kvBytesPerToken = num(body['kvBytesPerToken']);
  const kvDtype = KV_DTYPES.find((d) => d === body['kvDtype']);
  const model = body['modelFingerprint'];
  if (
    typeof address !== 'string' ||
    contextLength === undefined ||
    pageSize === undefined ||
    numPages === undefined ||
    kvBytesPerToken === undefined ||
    kvDtype === undefined ||
    typeof model !== 'string'
  ) {
    return 'it does not report address, contextLength, pageSize, kvPages, kvBytesPerToken, kvDtype and modelFingerprint (is it a Tessera PD worker of this version?)';
  }
  const transfer = (body['transfer'] ?? {}) as Record<string, unknown>;
  const pages = body['pages'] as PageCounts | undefined;
  const lora = body['loraAdapters'];
  const adapters =
    typeof lora === 'object' && lora !== null
      ? Object.fromEntries(Object.entries(lora).filter((e): e is [string, string] => typeof e[1] === 'string'))
      : {};
  return {
    address,
    limits: { contextLength, pageSize, numPages, kvBytesPerToken, kvDtype, model, adapters },
    pages: typeof pages === 'object' && pages !== null ? pages : undefined,
    totals: {
      transferBytes: num(transfer['bytesWritten']) ?? 0,
      checksumFailures: num(transfer['checksumFailures']) ?? 0,
      tagMismatches: num(body['tagMismatches']) ?? 0,
    },
  };
}
