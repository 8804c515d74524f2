// Chat templating and tokenization on worker_threads, so a long prompt never stalls the main
// thread's I/O (HTTP, SSE, /health, sockets). Each thread builds the same Tokenizer and
// ChatTemplate the main thread has, from the same sources (`promptRecipeOf`), and answers one
// job at a time: render (chat) and encode, ids back in a transferred Int32Array. The ids are
// those of the inline path, bit for bit (tokenizer-pool.test.ts compares them).
//
// Fairness (tokenizer-queue.ts): an idle thread takes the waiting job with the least text, with
// aging (a job overtaken MAX_PASSES times goes next); with two or more threads, thread 0 takes
// only jobs under RESERVED_MAX_CHARS, so however many huge prompts arrive, short ones always have
// a thread. Chunking one prompt over threads was not an option: BPE merges and pre-tokenizers
// look across any split, so chunked ids would differ from the inline ones.
// Bounds: at most maxQueuedJobs waiting (and maxQueuedChars of text); more is refused
// `overloaded` at once, never queued. A job that waits longer than maxWaitMs for a thread (with
// a `setTimer`) is taken out and refused `overloaded`, saying how much waited ahead of it.
// Lifecycle: a thread that exits (crash, out of memory) fails only the job it held with an
// `internal` error and is replaced; jobs queued behind it wait for the replacement. A thread that
// dies before it is ready twice in a row is not replaced again, and when no thread is left every
// waiting job fails: nothing waits forever. close() ends every thread and fails what is left.
// An idle thread is unref'd: a pool that was not closed does not keep a process alive, while a
// thread that is starting or holds a job does (an awaited job is never dropped by an exit).
// It must never answer a job with ids from anything but the recipe's tokenizer and template.
import { Worker } from 'node:worker_threads';
import { InvalidRequestError, NO_FAULTS, TesseraError, type FaultSet } from '../core/index.js';
import { RESERVED_MAX_CHARS, TokenizerQueue } from './tokenizer-queue.js';
import type {
  PromptRecipe,
  TokenizeJob,
  TokenizerThreadData,
  TokenizerThreadReply,
  TokenizerThreadRequest,
} from './tokenizer-messages.js';

/** Jobs with at least this much text (UTF-16 units) are long: thread 0 never takes them. */
export const LONG_JOB_CHARS = RESERVED_MAX_CHARS;

/** Calls `fire` after `ms` unless the returned cancel is called first (time is passed in: src/cli). */
export type SetTimer = (ms: number, fire: () => void) => () => void;

export interface TokenizerPoolOptions {
  readonly numThreads: number;
  /** Default 4096. */
  readonly maxQueuedJobs?: number;
  /** Default 256 Mi UTF-16 units. */
  readonly maxQueuedChars?: number;
  /** Longest wait for a thread before a job is refused `overloaded`; needs setTimer. */
  readonly maxWaitMs?: number;
  /** How the wait bound is timed; absent: jobs wait as long as it takes. */
  readonly setTimer?: SetTimer;
  readonly faults?: FaultSet;
}

interface Pending {
  readonly id: number;
  /** Arrival order (the id). */
  readonly seq: number;
  readonly job: TokenizeJob;
  readonly numChars: number;
  readonly resolve: (ids: number[]) => void;
  readonly reject: (error: Error) => void;
  /** Ends the wait bound's timer (on dispatch). */
  cancelWait: () => void;
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
  readonly #maxWaitMs: number;
  readonly #setTimer: SetTimer | undefined;
  readonly #slots: Slot[] = [];
  readonly #queue: TokenizerQueue<Pending>;
  #nextId = 0;
  #restarts = 0;
  #closed = false;

  constructor(recipe: PromptRecipe, options: TokenizerPoolOptions) {
    if (!Number.isInteger(options.numThreads) || options.numThreads < 1)
      throw new TesseraError('config_invalid', `a tokenizer pool needs at least one thread, got ${options.numThreads}`);
    this.#data = { recipe, faults: (options.faults ?? NO_FAULTS).names() };
    this.#maxQueuedJobs = options.maxQueuedJobs ?? 4096;
    this.#maxQueuedChars = options.maxQueuedChars ?? 256 * 1024 * 1024;
    // `fifo-tokenizer-queue` (tests only): arrival order and no wait bound, the queue as it was.
    const fifo = (options.faults ?? NO_FAULTS).has('fifo-tokenizer-queue');
    this.#queue = new TokenizerQueue<Pending>({ fifo });
    this.#maxWaitMs = fifo ? Number.POSITIVE_INFINITY : (options.maxWaitMs ?? Number.POSITIVE_INFINITY);
    this.#setTimer = options.setTimer;
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
      queuedJobs: this.#queue.length,
      busyThreads: this.#slots.filter((s) => s.busy !== null).length,
      restarts: this.#restarts,
    };
  }

  /**
   * The job's ids. Rejects with an InvalidRequestError when the template refuses the messages,
   * `overloaded` when the queue is full, the job waited past maxWaitMs or the pool closed,
   * `internal` when the thread died on it.
   */
  tokenize(job: TokenizeJob): Promise<number[]> {
    if (this.#closed) return Promise.reject(new TesseraError('overloaded', 'The tokenizer is shutting down.'));
    if (this.#slots.every((s) => s.retired))
      return Promise.reject(new TesseraError('internal', 'No tokenizer thread could be started.'));
    const numChars = jobChars(job);
    const queued = this.#queue.length;
    if (queued >= this.#maxQueuedJobs || this.#queue.numChars + numChars > this.#maxQueuedChars) {
      return Promise.reject(
        new TesseraError(
          'overloaded',
          `${queued} prompts (${this.#queue.numChars} characters) are waiting for the tokenizer; try again later.`,
        ),
      );
    }
    return new Promise<number[]>((resolve, reject) => {
      const id = this.#nextId++;
      const pending: Pending = { id, seq: id, job, numChars, resolve, reject, cancelWait: () => undefined };
      this.#queue.add(pending);
      if (this.#setTimer !== undefined && Number.isFinite(this.#maxWaitMs))
        pending.cancelWait = this.#setTimer(this.#maxWaitMs, () => this.#waitedTooLong(pending));
      this.#pump();
    });
  }

  #waitedTooLong(pending: Pending): void {
    const ahead = this.#queue.ahead(pending);
    if (!this.#queue.remove(pending)) return;
    const busy = this.#slots.filter((s) => s.busy !== null).length;
    pending.reject(
      new TesseraError(
        'overloaded',
        `This prompt (${pending.numChars} characters) waited ${this.#maxWaitMs} ms for a tokenizer thread: ` +
          `${busy} thread${busy === 1 ? ' was' : 's were'} busy and ${ahead.numJobs} prompts ` +
          `(${ahead.numChars} characters) waited ahead of it. Try again later.`,
      ),
    );
  }

  /** Ends every thread; jobs still waiting or running fail `overloaded`. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const gone = new TesseraError('overloaded', 'The tokenizer is shutting down.');
    for (const p of this.#queue.drain()) {
      p.cancelWait();
      p.reject(gone);
    }
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
      for (const p of this.#queue.drain()) {
        p.cancelWait();
        p.reject(none);
      }
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

  /** Hands queued jobs to idle threads: thread 0 (with company) short ones only, the others the shortest (aged). */
  #pump(): void {
    // Thread 0 keeps to short jobs only while another thread is there (or coming back) for long ones.
    const shortOnly = this.#slots.some((s) => s.index !== 0 && !s.retired);
    for (const slot of this.#slots) {
      if (!slot.ready || slot.busy !== null || slot.retired) continue;
      const next = this.#queue.take(slot.index === 0 && shortOnly);
      if (next === undefined) continue;
      next.cancelWait();
      slot.busy = next;
      slot.worker.ref();
      slot.worker.postMessage({ kind: 'job', id: next.id, job: next.job } satisfies TokenizerThreadRequest);
    }
  }
}

/** All the text a job renders and encodes, as src/api's prompt-tokenizer.ts counts it (16 per turn and call). */
function jobChars(job: TokenizeJob): number {
  if (job.kind === 'text') return job.text.length;
  let n = job.tools === undefined || job.tools.length === 0 ? 0 : JSON.stringify(job.tools).length;
  for (const m of job.messages) {
    n += 16 + m.role.length + m.content.length + (m.toolCallId?.length ?? 0) + (m.reasoning?.length ?? 0);
    for (const c of m.toolCalls ?? []) n += 16 + c.id.length + c.name.length + c.arguments.length;
  }
  return n;
}

/** The built thread entry (from src/, as under vitest, the one in dist/: run `npm run build`). */
function threadMainUrl(): URL {
  const here = import.meta.url;
  return here.endsWith('.ts')
    ? new URL('../../dist/tokenizer/tokenizer-thread-main.js', here)
    : new URL('./tokenizer-thread-main.js', here);
}
