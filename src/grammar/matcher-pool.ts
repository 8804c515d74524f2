// Where a request's matcher lives. Grammars that compiled fast (under heavyCompileMs, as the
// checker measured) share one matcher thread; a heavy grammar gets a thread of its own, so its
// compile (hundreds of ms to seconds) never holds up the masks of other requests: a thread
// runs one thing at a time, and a mask waits behind a compile on its thread (measured: 839 ms
// behind a 100-pattern schema on m100). A heavy thread ends when its last matcher is disposed.
// At most maxHeavyThreads exist; past that a heavy grammar goes to the shared thread (slower
// masks for a while, never a refusal).
// It must never put two grammars on one heavy thread, or keep an idle heavy thread.
import type { GrammarSource, GrammarThreadData } from './grammar-messages.js';
import { Matchers, type MatcherHandle } from './matchers.js';

export interface MatcherPoolOptions {
  readonly data: GrammarThreadData;
  readonly keepTrapped: boolean;
  readonly heavyCompileMs: number;
  readonly maxHeavyThreads: number;
}

export class MatcherPool {
  readonly #o: MatcherPoolOptions;
  readonly #shared: Matchers;
  readonly #heavy = new Map<string, Matchers>();
  #heavyRestarts = 0;

  constructor(options: MatcherPoolOptions) {
    this.#o = options;
    this.#shared = new Matchers(options.data, options.keepTrapped);
  }

  get restarts(): number {
    return this.#shared.restarts + this.#heavyRestarts;
  }

  /** Heavy threads now running. */
  get numHeavyThreads(): number {
    return this.#heavy.size;
  }

  /** Starts the shared thread, if it is not running. */
  warm(): void {
    this.#shared.warm();
  }

  async create(
    key: string,
    source: GrammarSource,
    compileMs: number,
  ): Promise<{ readonly handle: MatcherHandle; readonly matchers: Matchers }> {
    const matchers = compileMs < this.#o.heavyCompileMs ? this.#shared : this.#heavyFor(key);
    return { handle: await matchers.create(key, source), matchers };
  }

  async close(): Promise<void> {
    const all = [this.#shared, ...this.#heavy.values()];
    this.#heavy.clear();
    await Promise.all(all.map((m) => m.close()));
  }

  #heavyFor(key: string): Matchers {
    const running = this.#heavy.get(key);
    if (running !== undefined) return running;
    if (this.#heavy.size >= this.#o.maxHeavyThreads) return this.#shared;
    const matchers: Matchers = new Matchers(this.#o.data, this.#o.keepTrapped, () => {
      if (this.#heavy.get(key) !== matchers) return;
      this.#heavy.delete(key);
      this.#heavyRestarts += matchers.restarts;
      void matchers.close();
    });
    this.#heavy.set(key, matchers);
    return matchers;
  }
}
