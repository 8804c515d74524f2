// Where a request's matcher lives. Grammars that compiled fast (under heavyCompileMs, as the
// checker measured) share one matcher thread; a heavy grammar gets a thread of its own, so its
// compile (hundreds of ms to seconds) never holds up the masks of other requests: a thread
// runs one thing at a time, and a mask waits behind a compile on its thread (measured: 839 ms
// behind a 100-pattern schema on m100). An idle heavy thread stays, its grammar compiled, for
// the next request with that schema; at most maxHeavyThreads exist: a new heavy grammar takes
// the least recently used idle one's place, or, when every one is busy, goes to the shared
// thread (slower masks for a while, never a refusal).
// It must never put two grammars on one heavy thread, or end a heavy thread a matcher lives on.
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
    let restarts = this.#shared.restarts + this.#heavyRestarts;
    for (const m of this.#heavy.values()) restarts += m.restarts;
    return restarts;
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
    if (running !== undefined) {
      this.#heavy.delete(key);
      this.#heavy.set(key, running); // most recently used last
      return running;
    }
    if (this.#heavy.size >= this.#o.maxHeavyThreads) {
      const idle = [...this.#heavy].find(([, m]) => m.idle); // the least recently used idle one
      if (idle === undefined) return this.#shared;
      this.#heavy.delete(idle[0]);
      this.#heavyRestarts += idle[1].restarts;
      void idle[1].close();
    }
    const matchers = new Matchers(this.#o.data, this.#o.keepTrapped);
    this.#heavy.set(key, matchers);
    return matchers;
  }
}
