// Runs batch lines at low priority behind interactive traffic: every `pollMs` it starts lines of
// the active batches (oldest batch first, lines in order) while fewer than `maxConcurrent` batch
// lines run AND no more than `maxInteractive` interactive generate requests are in flight; so a
// batch line starts only in a lull. When an interactive request arrives, the running batch lines
// are aborted (preempted) and run again later, so a newcomer's first token does not wait behind
// them; a line is preempted at most MAX_PREEMPTIONS times, then runs to its end (no starvation).
// A line goes through the very route an HTTP request takes (handleGenerate: validation, template,
// context check, the tenant's rate limits), as its batch's tenant, with a captured response.
// A line's answer is recorded in the store (durable) when it ends; a line whose run was cut by
// shutdown, overload (503) or the tenant's rate limit (429) is not recorded and runs again later
// (after a restart too). Cancellation: no new lines; the batch is `cancelled` once its running
// lines end. Expiry (completion_window): lines not answered by expires_at get `batch_expired`.
// Must never record a line twice (the store keeps the first), nor record a line it did not run
// to its end.
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { TERMINAL, type BatchState, type BatchStore, type RequestLine } from '../../batch/index.js';
import type { TenantAuth } from '../http/auth.js';
import { answeredLine, refusedLine } from './batch-shapes.js';
import { handleGenerate, type GenerateContext } from './generate-route.js';

export interface BatchRunnerOptions {
  /** Most batch lines running at once (default 2). */
  readonly maxConcurrent?: number;
  /** A line starts only while at most this many interactive generate requests are in flight (default 0). */
  readonly maxInteractive?: number;
  readonly pollMs?: number;
}

/** Interactive generate requests in flight (routes.ts counts them); `onEnter`: the runner's preemption. */
export class InteractiveGauge {
  count = 0;
  onEnter: (() => void) | null = null;

  enter(): void {
    this.count++;
    this.onEnter?.();
  }

  leave(): void {
    this.count--;
  }
}

/** How many times one line may be preempted by interactive arrivals before it runs to its end regardless. */
export const MAX_PREEMPTIONS = 3;

export class BatchRunner {
  readonly #store: BatchStore;
  readonly #ctx: GenerateContext;
  readonly #gauge: InteractiveGauge;
  readonly #maxConcurrent: number;
  readonly #maxInteractive: number;
  readonly #stop = new AbortController();
  readonly #running = new Map<string, Promise<void>>();
  /** Running lines that may still be preempted: their abort. */
  readonly #preemptible = new Map<string, AbortController>();
  readonly #preempted = new Map<string, number>();
  readonly #timer: NodeJS.Timeout;
  readonly #now: () => number;

  constructor(store: BatchStore, ctx: GenerateContext, gauge: InteractiveGauge, options: BatchRunnerOptions = {}) {
    this.#store = store;
    this.#ctx = ctx;
    this.#gauge = gauge;
    this.#maxConcurrent = options.maxConcurrent ?? 1;
    this.#maxInteractive = options.maxInteractive ?? 0;
    this.#now = () => ctx.clock.unixSeconds();
    this.#timer = setInterval(() => this.tick(), options.pollMs ?? 20);
    this.#timer.unref();
    // An interactive request arrives: running batch lines give way (aborted, run again later), each at most MAX_PREEMPTIONS times.
    gauge.onEnter = () => {
      for (const [key, abort] of this.#preemptible) {
        this.#preempted.set(key, (this.#preempted.get(key) ?? 0) + 1);
        abort.abort();
      }
      this.#preemptible.clear();
    };
  }

  /** One scheduling pass (also run by the timer). */
  tick(): void {
    if (this.#stop.signal.aborted) return;
    const now = this.#now();
    for (const batch of this.#store.active().sort((a, b) => a.createdAt - b.createdAt)) {
      if (batch.status === 'in_progress' && now >= batch.expiresAt) this.#expire(batch, now);
      if (batch.status === 'cancelling') {
        if (!this.#runsOf(batch)) this.#store.setStatus(batch, 'cancelled', now);
        continue;
      }
      if (batch.status !== 'in_progress') continue;
      for (const line of batch.lines) {
        if (this.#running.size >= this.#maxConcurrent || this.#gauge.count > this.#maxInteractive) return;
        const key = `${batch.id}:${line.index}`;
        if (batch.results.has(line.index) || this.#running.has(key)) continue;
        if (line.url !== batch.endpoint) {
          const message = `The line's url ${line.url} is not the batch's endpoint ${batch.endpoint}.`;
          this.#store.answer(batch, refusedLine(batch, line.index, line.customId, { code: 'invalid_url', message }));
          continue;
        }
        const run = this.#run(batch, line, key).finally(() => {
          this.#running.delete(key);
          this.#preemptible.delete(key);
        });
        this.#running.set(key, run);
      }
      this.#finishIfDone(batch, now);
    }
  }

  /** Stops starting lines, aborts the running ones (they run again after a restart), waits for them. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#stop.abort();
    await Promise.allSettled([...this.#running.values()]);
  }

  async #run(batch: BatchState, line: RequestLine, key: string): Promise<void> {
    const preempt = new AbortController();
    if ((this.#preempted.get(key) ?? 0) < MAX_PREEMPTIONS) this.#preemptible.set(key, preempt);
    const { status, body } = await this.#call(batch.tenant, line, preempt.signal);
    if (this.#stop.signal.aborted || preempt.signal.aborted) return; // cut by shutdown or preempted: runs again
    this.#preempted.delete(key);
    if (status === 429 || status === 503) return; // the tenant's limit or the node's load: later
    this.#store.answer(batch, answeredLine(batch, line.index, line.customId, status, body));
    this.#finishIfDone(batch, this.#now());
  }

  /** The line through handleGenerate, as its tenant, the answer captured. */
  async #call(tenant: string, line: RequestLine, preempt: AbortSignal): Promise<{ status: number; body: unknown }> {
    const bytes = Buffer.from(JSON.stringify({ ...line.body, stream: false }), 'utf8');
    const req = Object.assign(Readable.from([bytes]), {
      headers: { 'content-type': 'application/json', 'content-length': String(bytes.length) },
      method: 'POST',
      url: line.url,
    }) as unknown as IncomingMessage;
    const res = new CapturedResponse();
    const auth = { tenantOf: () => ({ kind: 'ok', tenant }), seesDetail: () => false, enabled: true };
    const ctx: GenerateContext = {
      ...this.#ctx,
      auth: auth as unknown as TenantAuth,
      shutdown: AbortSignal.any([this.#ctx.shutdown, this.#stop.signal, preempt]),
    };
    const endpoint = line.url === '/v1/chat/completions' ? 'chat' : 'completion';
    await handleGenerate(endpoint, req, res as unknown as ServerResponse, ctx);
    let body: unknown = null;
    try {
      body = JSON.parse(res.text) as unknown;
    } catch {
      body = null;
    }
    return { status: res.statusCode, body };
  }

  #runsOf(batch: BatchState): boolean {
    return [...this.#running.keys()].some((k) => k.startsWith(`${batch.id}:`));
  }

  #finishIfDone(batch: BatchState, now: number): void {
    if (batch.status !== 'in_progress' || batch.results.size < batch.total || this.#runsOf(batch)) return;
    this.#store.setStatus(batch, 'finalizing', now);
    this.#store.setStatus(batch, 'completed', now);
  }

  #expire(batch: BatchState, now: number): void {
    for (const line of batch.lines)
      if (!batch.results.has(line.index))
        this.#store.answer(
          batch,
          refusedLine(batch, line.index, line.customId, {
            code: 'batch_expired',
            message: 'This request could not be executed before the completion window expired.',
          }),
        );
    this.#store.setStatus(batch, 'expired', now);
  }
}

/** Whether a batch still has work (for the routes' cancel). */
export const isFinished = (batch: BatchState): boolean => TERMINAL.has(batch.status);

/** What a route writes, kept: its status and body (handleGenerate answers a batch line with JSON). */
class CapturedResponse extends EventEmitter {
  statusCode = 200;
  text = '';
  headersSent = false;
  writableFinished = false;
  destroyed = false;

  writeHead(status: number): this {
    this.statusCode = status;
    this.headersSent = true;
    return this;
  }

  setHeader(): this {
    return this;
  }

  write(chunk: string | Buffer): boolean {
    this.text += chunk.toString();
    return true;
  }

  end(chunk?: string | Buffer): this {
    if (chunk !== undefined) this.text += chunk.toString();
    this.writableFinished = true;
    this.emit('finish');
    this.emit('close');
    return this;
  }
}
