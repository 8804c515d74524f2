// One grammar thread, main side: starts grammar-thread-main.ts with the model's vocabulary,
// forwards its replies, and reports its end once (a crash, an exit, or terminate()). The thread
// keeps the process alive only while the owner has work on it (hold/release).
// It must never restart itself: checker.ts and matchers.ts decide what a death costs and when
// to start again.
import { Worker } from 'node:worker_threads';
import { TesseraError } from '../core/index.js';
import type { GrammarThreadData, GrammarThreadReply, GrammarThreadRequest } from './grammar-messages.js';

export interface GrammarThreadHooks {
  onReply(reply: Exclude<GrammarThreadReply, { kind: 'ready' }>): void;
  /** Called once, when the thread is gone (`why` says how); never after terminate(). */
  onExit(why: string): void;
}

export class GrammarThread {
  /** Resolves once the thread built its tokenizer info and compiler; rejects when it died first. */
  readonly ready: Promise<void>;
  readonly #worker: Worker;
  #held = 0;
  #gone = false;

  constructor(data: GrammarThreadData, hooks: GrammarThreadHooks) {
    this.#worker = new Worker(threadMainUrl(), { workerData: data });
    this.#worker.unref();
    let lastError = '';
    this.ready = new Promise<void>((resolve, reject) => {
      this.#worker.on('message', (reply: GrammarThreadReply) => {
        if (reply.kind === 'ready') resolve();
        else if (!this.#gone) hooks.onReply(reply);
      });
      this.#worker.on('error', (error) => (lastError = `: ${error.message}`));
      this.#worker.on('exit', (code) => {
        const why = `the grammar thread stopped (exit code ${code}${lastError})`;
        reject(new TesseraError('internal', why));
        if (this.#gone) return;
        this.#gone = true;
        hooks.onExit(why);
      });
    });
    this.ready.catch(() => undefined); // the owner learns of it through its own requests
  }

  get gone(): boolean {
    return this.#gone;
  }

  post(request: GrammarThreadRequest): void {
    if (!this.#gone) this.#worker.postMessage(request);
  }

  /** Keep the process alive while something waits on this thread. */
  hold(): void {
    if (this.#held++ === 0) this.#worker.ref();
  }

  release(): void {
    if (this.#held > 0 && --this.#held === 0) this.#worker.unref();
  }

  /** Ends the thread (at once, even inside a compile); onExit is not called. */
  async terminate(): Promise<void> {
    this.#gone = true;
    await this.#worker.terminate();
  }
}

/** The built thread entry (from src/, as under vitest, the one in dist/: run `npm run build`). */
function threadMainUrl(): URL {
  const here = import.meta.url;
  return here.endsWith('.ts')
    ? new URL('../../dist/grammar/grammar-thread-main.js', here)
    : new URL('./grammar-thread-main.js', here);
}
