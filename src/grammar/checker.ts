// The checker: a sacrificial grammar thread that compiles each new schema first, alone, under a
// time budget, and keeps nothing. Only schemas it compiled reach the matcher thread (compiling is
// deterministic, so they do not trap there either).
//   over the budget -> the thread is ended at once (even inside the WASM compile) and rebuilt;
//                      only this schema is refused ("too costly to compile")
//   a WASM trap     -> the instance is discarded and rebuilt; only this schema is refused
//   a full queue    -> refused at once (`overloaded`), never queued
// One schema compiles at a time; the budget starts when the thread takes it, not while it waits.
// It must never hold a matcher, or reuse an instance that trapped (unless the test-only fault
// point keep-trapped-grammar says so: the negative control of this defence).
import { GrammarThread } from './grammar-thread.js';
import type { GrammarSource, GrammarThreadData, GrammarThreadReply } from './grammar-messages.js';

export type CheckOutcome =
  | { readonly kind: 'ok'; readonly compileMs: number }
  | { readonly kind: 'refused'; readonly message: string }
  | { readonly kind: 'trapped'; readonly message: string }
  | { readonly kind: 'too-costly'; readonly budgetMs: number }
  | { readonly kind: 'overloaded'; readonly numQueued: number }
  | { readonly kind: 'unavailable'; readonly message: string };

export interface CheckerOptions {
  readonly data: GrammarThreadData;
  readonly budgetMs: number;
  readonly maxQueued: number;
  readonly keepTrapped: boolean;
}

interface Job {
  readonly id: number;
  readonly source: GrammarSource;
  readonly resolve: (outcome: CheckOutcome) => void;
}

export class Checker {
  readonly #o: CheckerOptions;
  readonly #queue: Job[] = [];
  #thread: GrammarThread | undefined;
  #current: Job | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #nextId = 0;
  #restarts = 0;
  #closed = false;

  constructor(options: CheckerOptions) {
    this.#o = options;
  }

  /** Threads started again after a trap, a timeout or a crash. */
  get restarts(): number {
    return this.#restarts;
  }

  /** Never rejects: every way a check can end is an outcome. */
  check(source: GrammarSource): Promise<CheckOutcome> {
    if (this.#closed) return Promise.resolve({ kind: 'unavailable', message: 'the grammar engine is closed' });
    if (this.#queue.length >= this.#o.maxQueued)
      return Promise.resolve({ kind: 'overloaded', numQueued: this.#queue.length });
    return new Promise((resolve) => {
      this.#queue.push({ id: this.#nextId++, source, resolve });
      void this.#pump();
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const job of this.#queue.splice(0))
      job.resolve({ kind: 'unavailable', message: 'the grammar engine is closed' });
    this.#finish({ kind: 'unavailable', message: 'the grammar engine is closed' });
    await this.#thread?.terminate();
    this.#thread = undefined;
  }

  async #pump(): Promise<void> {
    if (this.#current !== undefined || this.#closed) return;
    const job = this.#queue.shift();
    if (job === undefined) return;
    this.#current = job;
    const thread = (this.#thread ??= this.#spawn());
    thread.hold();
    try {
      await thread.ready;
    } catch (error) {
      // It died before it could compile anything: this job fails, the next one starts a new thread.
      if (this.#current === job)
        this.#finish({ kind: 'unavailable', message: error instanceof Error ? error.message : String(error) });
      return;
    }
    if (this.#current !== job || thread !== this.#thread) return;
    this.#timer = setTimeout(() => this.#overBudget(job), this.#o.budgetMs);
    thread.post({ kind: 'check', id: job.id, source: job.source });
  }

  #spawn(): GrammarThread {
    const thread: GrammarThread = new GrammarThread(this.#o.data, {
      onReply: (reply) => this.#onReply(thread, reply),
      onExit: (why) => {
        if (this.#thread !== thread) return;
        this.#thread = undefined;
        this.#restarts++;
        this.#finish({ kind: 'trapped', message: why });
      },
    });
    return thread;
  }

  #onReply(thread: GrammarThread, reply: Exclude<GrammarThreadReply, { kind: 'ready' }>): void {
    const job = this.#current;
    if (job === undefined || thread !== this.#thread) return;
    switch (reply.kind) {
      case 'checked':
        if (reply.id === job.id) this.#finish({ kind: 'ok', compileMs: reply.compileMs });
        return;
      case 'refused':
        if (reply.id === job.id) this.#finish({ kind: 'refused', message: reply.message });
        return;
      case 'trapped':
        if (!this.#o.keepTrapped) this.#discard(thread);
        this.#finish({ kind: 'trapped', message: reply.message });
        return;
      default:
        return;
    }
  }

  #overBudget(job: Job): void {
    if (this.#current !== job || this.#thread === undefined) return;
    this.#discard(this.#thread);
    this.#finish({ kind: 'too-costly', budgetMs: this.#o.budgetMs });
  }

  #discard(thread: GrammarThread): void {
    this.#thread = undefined;
    this.#restarts++;
    void thread.terminate();
  }

  /** Ends the current job with `outcome` and takes the next. */
  #finish(outcome: CheckOutcome): void {
    const job = this.#current;
    if (job === undefined) return;
    this.#current = undefined;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#thread?.release();
    job.resolve(outcome);
    void this.#pump();
  }
}
