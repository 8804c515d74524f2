// Chat templating and tokenization on worker_threads, so a long prompt never stalls the main
// thread's I/O (HTTP, SSE, /health, sockets). Each thread builds the same Tokenizer and
// ChatTemplate the main thread has, from the same sources (`promptRecipeOf`), and answers one
// job at a time: render (chat) and encode, ids back in a transferred Int32Array. The ids are
// those of the inline path, bit for bit (tokenizer-pool.test.ts compares them).
//
// Fairness: jobs wait in two FIFO queues, short and long (LONG_JOB_CHARS). With two or more
// threads, thread 0 takes only short jobs and the others take the oldest job of either queue, so
// a huge prompt (or many) occupies at most the general threads and short prompts always have a
// thread. Chunking one prompt over threads was not an option: BPE merges and pre-tokenizers look
// across any split, so chunked ids would differ from the inline ones.
// Bounds: at most maxQueuedJobs waiting (and maxQueuedChars of text); more is refused
// `overloaded` at once, never queued.
// Lifecycle: a thread that exits (crash, out of memory) fails only the job it held with an
// `internal` error and is replaced; jobs queued behind it wait for the replacement. A thread that
// dies before it is ready twice in a row is not replaced again, and when no thread is left every
// waiting job fails: nothing waits forever. close() ends every thread and fails what is left.
// An idle thread is unref'd: a pool that was not closed does not keep a process alive, while a
// thread that is starting or holds a job does (an awaited job is never dropped by an exit).
// It must never answer a job with ids from anything but the recipe's tokenizer and template.
import { Worker } from 'node:worker_threads';
import { InvalidRequestError, NO_FAULTS, TesseraError, type FaultSet } from '../core/index.js';
import type {
  PromptRecipe,
  TokenizeJob,
  TokenizerThreadData,
  TokenizerThreadReply,
  TokenizerThreadRequest,
} from './tokenizer-messages.js';

/** Jobs with at least this much text (UTF-16 units) are long: thread 0 never takes them. */
export const LONG_JOB_CHARS = 16 * 1024;

export interface TokenizerPoolOptions {
  readonly numThreads: number;
  /** Default 4096. */
  readonly maxQueuedJobs?: number;
  /** Default 256 Mi UTF-16 units. */
  readonly maxQueuedChars?: number;
  readonly faults?: FaultSet;
}

interface Pending {
  readonly id: number;
  readonly job: TokenizeJob;
  readonly numChars: number;
  readonly resolve: (ids: number[]) => void;
  readonly reject: (error: Error) => void;
}

interface Slot {
  readonly index: number;
  worker: Worker;
  ready: boolean;
  /** The job this thread holds, if any. */
  busy: Pending | null;
  /** Deaths before 'ready' in a row. */
  earlyDeaths: number;
  /** Not replaced any more (closing, or it kept dying before it was ready). */
  retired: boolean;
}

export interface TokenizerPoolStats {
  readonly numThreads: number;
  readonly queuedJobs: number;
  readonly busyThreads: number;
  readonly restarts: number;
}

/** Starts the threads; resolves once every one has built its tokenizer. */
export async function startTokenizerPool(recipe: PromptRecipe, options: TokenizerPoolOptions): Promise<TokenizerPool> {
  const pool = new TokenizerPool(recipe, options);
  try {
    await pool.ready;
  } catch (error) {
    await pool.close(); // no thread left starting again behind a failed start
    throw error;
  }
  return pool;
}

export class TokenizerPool {
  readonly ready: Promise<void>;
  readonly #data: TokenizerThreadData;
  readonly #maxQueuedJobs: number;
  readonly #maxQueuedChars: number;
  readonly #slots: Slot[] = [];
  readonly #short: Pending[] = [];
  readonly #long: Pending[] = [];
  #queuedChars = 0;
  #nextId = 0;
  #restarts = 0;
  #closed = false;

  constructor(recipe: PromptRecipe, options: TokenizerPoolOptions) {
    if (!Number.isInteger(options.numThreads) || options.numThreads < 1)
      throw new TesseraError('config_invalid', `a tokenizer pool needs at least one thread, got ${options.numThreads}`);
    this.#data = { recipe, faults: (options.faults ?? NO_FAULTS).names() };
    this.#maxQueuedJobs = options.maxQueuedJobs ?? 4096;
    this.#maxQueuedChars = options.maxQueuedChars ?? 256 * 1024 * 1024;
    const started: Promise<void>[] = [];
    for (let index = 0; index < options.numThreads; index++) {
      const slot: Slot = { index, worker: null as never, ready: false, busy: null, earlyDeaths: 0, retired: false };
      this.#slots.push(slot);
      started.push(this.#spawn(slot));
    }
    this.ready = Promise.all(started).then(() => undefined);
    // A start-up failure is the caller's (through `ready`); no unhandled rejection meanwhile.
    this.ready.catch(() => undefined);
  }

  get stats(): TokenizerPoolStats {
    return {
      numThreads: this.#slots.filter((s) => !s.retired).length,
      queuedJobs: this.#short.length + this.#long.length,
      busyThreads: this.#slots.filter((s) => s.busy !== null).length,
      restarts: this.#restarts,
    };
  }

  /**
   * The job's ids. Rejects with an InvalidRequestError when the template refuses the messages,
   * `overloaded` when the queue is full or the pool closed, `internal` when the thread died on it.
   */
  tokenize(job: TokenizeJob): Promise<number[]> {
    if (this.#closed) return Promise.reject(new TesseraError('overloaded', 'The tokenizer is shutting down.'));
    if (this.#slots.every((s) => s.retired))
      return Promise.reject(new TesseraError('internal', 'No tokenizer thread could be started.'));
    const numChars = jobChars(job);
    const queued = this.#short.length + this.#long.length;
    if (queued >= this.#maxQueuedJobs || this.#queuedChars + numChars > this.#maxQueuedChars) {
      return Promise.reject(
        new TesseraError(
          'overloaded',
          `${queued} prompts (${this.#queuedChars} characters) are waiting for the tokenizer; try again later.`,
        ),
      );
    }
    return new Promise<number[]>((resolve, reject) => {
      const pending: Pending = { id: this.#nextId++, job, numChars, resolve, reject };
      (numChars >= LONG_JOB_CHARS ? this.#long : this.#short).push(pending);
      this.#queuedChars += numChars;
      this.#pump();
    });
  }

  /** Ends every thread; jobs still waiting or running fail `overloaded`. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const gone = new TesseraError('overloaded', 'The tokenizer is shutting down.');
    for (const p of [...this.#short.splice(0), ...this.#long.splice(0)]) p.reject(gone);
    this.#queuedChars = 0;
    await Promise.all(
      this.#slots.map(async (slot) => {
        slot.retired = true;
        slot.busy?.reject(gone);
        slot.busy = null;
        await slot.worker.terminate();
      }),
    );
  }

  #spawn(slot: Slot): Promise<void> {
    const worker = new Worker(threadMainUrl(), { workerData: this.#data });
    slot.worker = worker;
    slot.ready = false;
    return new Promise<void>((resolve, reject) => {
      let lastError: unknown = null;
      worker.on('message', (reply: TokenizerThreadReply) => {
        if (reply.kind === 'ready') {
          slot.ready = true;
          worker.unref();
          slot.earlyDeaths = 0;
          resolve();
          this.#pump();
          return;
        }
        this.#answer(slot, reply);
      });
      worker.on('error', (error) => (lastError = error));
      worker.on('exit', (code) => {
        if (slot.worker !== worker) return;
        const why = lastError instanceof Error ? `: ${lastError.message}` : '';
        reject(
          new TesseraError('internal', `a tokenizer thread stopped before it was ready (exit code ${code})${why}`),
        );
        this.#died(slot, code, why);
      });
    });
  }

  #died(slot: Slot, code: number, why: string): void {
    const held = slot.busy;
    slot.busy = null;
    held?.reject(
      new TesseraError(
        'internal',
        `The tokenizer thread stopped (exit code ${code}${why}) while it held this prompt; it was restarted.`,
      ),
    );
    if (slot.retired || this.#closed) return;
    if (!slot.ready) slot.earlyDeaths++;
    if (slot.earlyDeaths >= 2) {
      slot.retired = true;
    } else {
      this.#restarts++;
      this.#spawn(slot).catch(() => undefined);
    }
    if (this.#slots.every((s) => s.retired)) {
      const none = new TesseraError('internal', 'No tokenizer thread could be started.');
      for (const p of [...this.#short.splice(0), ...this.#long.splice(0)]) p.reject(none);
      this.#queuedChars = 0;
    }
  }

  #answer(slot: Slot, reply: Exclude<TokenizerThreadReply, { kind: 'ready' }>): void {
    const held = slot.busy;
    if (held === null || held.id !== reply.id) return;
    slot.busy = null;
    slot.worker.unref();
    switch (reply.kind) {
      case 'done':
        held.resolve(Array.from(reply.ids));
        break;
      case 'invalid':
        held.reject(new InvalidRequestError(reply.message, reply.param ?? undefined));
        break;
      case 'failed':
        held.reject(new TesseraError('internal', `The tokenizer failed on this prompt: ${reply.message}`));
        break;
    }
    this.#pump();
  }

  /** Hands queued jobs to idle threads: thread 0 (with company) short ones only, the others the oldest. */
  #pump(): void {
    // Thread 0 keeps to short jobs only while another thread is there (or coming back) for long ones.
    const shortOnly = this.#slots.some((s) => s.index !== 0 && !s.retired);
    for (const slot of this.#slots) {
      if (!slot.ready || slot.busy !== null || slot.retired) continue;
      const next = slot.index === 0 && shortOnly ? this.#short.shift() : this.#oldest();
      if (next === undefined) continue;
      this.#queuedChars -= next.numChars;
      slot.busy = next;
      slot.worker.ref();
      slot.worker.postMessage({ kind: 'job', id: next.id, job: next.job } satisfies TokenizerThreadRequest);
    }
  }

  #oldest(): Pending | undefined {
    const s = this.#short[0];
    const l = this.#long[0];
    if (s === undefined) return this.#long.shift();
    if (l === undefined || s.id < l.id) return this.#short.shift();
    return this.#long.shift();
  }
}

function jobChars(job: TokenizeJob): number {
  switch (job.kind) {
    case 'text':
      return job.text.length;
    case 'chat':
      return job.messages.reduce((n, m) => n + m.content.length, 0);
  }
}

/** The built thread entry (from src/, as under vitest, the one in dist/: run `npm run build`). */
function threadMainUrl(): URL {
  const here = import.meta.url;
  return here.endsWith('.ts')
    ? new URL('../../dist/model/tokenizer-thread-main.js', here)
    : new URL('./tokenizer-thread-main.js', here);
}
