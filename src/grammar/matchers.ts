// The matcher thread, main side: builds matchers there (over grammars the checker approved) and
// asks for masks. Every mask asked for in one turn of the event loop goes in one message (a step
// prepares all its constrained requests together), and comes back in one.
// If the thread dies (a crash, or a trap that should not happen after the checker), only the
// requests whose matchers were on it fail; the next matcher starts a new thread (a new
// generation) unless the test-only fault point keep-trapped-grammar keeps the trapped one.
// It must never hand one request's mask to another (results are matched by matcher id).
import { GrammarThread } from './grammar-thread.js';
import { GrammarError } from './grammar-error.js';
import type { GrammarSource, GrammarThreadData, GrammarThreadReply, StepResult } from './grammar-messages.js';

export interface MatcherHandle {
  readonly id: number;
  readonly generation: number;
}

export interface StepReply {
  readonly mask: Int32Array;
  readonly terminated: boolean;
  /** A speculative step's masks after each draft the grammar accepted (the matcher rolled them back). */
  readonly draftMasks: readonly Int32Array[];
}

interface StepWaiter {
  readonly id: number;
  readonly tokens: readonly number[];
  readonly drafts: readonly number[];
  readonly resolve: (reply: StepReply) => void;
  readonly reject: (error: Error) => void;
}

interface Creating {
  readonly resolve: (handle: MatcherHandle) => void;
  readonly reject: (error: Error) => void;
}

export class Matchers {
  readonly #data: GrammarThreadData;
  readonly #keepTrapped: boolean;
  #thread: GrammarThread | undefined;
  #generation = 0;
  #nextId = 0;
  readonly #creating = new Map<number, Creating>();
  /** Batches sent, oldest first: the thread answers them in order. */
  readonly #sent: StepWaiter[][] = [];
  #batch: StepWaiter[] = [];
  #restarts = 0;
  /** Matchers built and not yet disposed, on the current thread. */
  #numLive = 0;
  readonly #onIdle: (() => void) | undefined;

  /** `onIdle`: called when the last matcher is disposed and nothing waits on this thread. */
  constructor(data: GrammarThreadData, keepTrapped: boolean, onIdle?: () => void) {
    this.#data = data;
    this.#keepTrapped = keepTrapped;
    this.#onIdle = onIdle;
  }

  get restarts(): number {
    return this.#restarts;
  }

  /** Starts the thread now (it builds the vocabulary's tables while the schema is being checked). */
  warm(): void {
    this.#thread ??= this.#spawn();
  }

  /** A matcher over `source`'s grammar (compiled once per `key` on the thread). */
  create(key: string, source: GrammarSource): Promise<MatcherHandle> {
    const thread = (this.#thread ??= this.#spawn());
    const handle: MatcherHandle = { id: this.#nextId++, generation: this.#generation };
    return new Promise<MatcherHandle>((resolve, reject) => {
      this.#creating.set(handle.id, { resolve: () => resolve(handle), reject });
      thread.hold();
      thread.post({ kind: 'create', id: handle.id, key, source });
    });
  }

  /**
   * Accept `tokens`, then the next mask, and with `drafts` the masks after each draft the grammar
   * accepts (rolled back after); batched with every other step of this turn.
   */
  step(handle: MatcherHandle, tokens: readonly number[], drafts: readonly number[] = []): Promise<StepReply> {
    if (handle.generation !== this.#generation || this.#thread === undefined)
      return Promise.reject(lost('its grammar thread stopped'));
    return new Promise<StepReply>((resolve, reject) => {
      if (this.#batch.length === 0) queueMicrotask(() => this.#flush());
      this.#batch.push({ id: handle.id, tokens, drafts, resolve, reject });
    });
  }

  dispose(handle: MatcherHandle): void {
    if (handle.generation !== this.#generation) return;
    this.#thread?.post({ kind: 'dispose', ids: [handle.id] });
    this.#numLive--;
    this.#maybeIdle();
  }

  /** No matcher lives here and nothing waits on this thread. */
  get idle(): boolean {
    return this.#numLive === 0 && this.#creating.size === 0 && this.#sent.length === 0 && this.#batch.length === 0;
  }

  #maybeIdle(): void {
    if (this.idle) this.#onIdle?.();
  }

  async close(): Promise<void> {
    const thread = this.#thread;
    this.#lose(lost('the grammar engine closed'), false);
    await thread?.terminate();
  }

  #flush(): void {
    const batch = this.#batch;
    this.#batch = [];
    const thread = this.#thread;
    if (thread === undefined) {
      for (const waiter of batch) waiter.reject(lost('its grammar thread stopped'));
      return;
    }
    this.#sent.push(batch);
    thread.hold();
    thread.post({
      kind: 'step',
      batch: batch.map(({ id, tokens, drafts }) => (drafts.length === 0 ? { id, tokens } : { id, tokens, drafts })),
    });
  }

  #spawn(): GrammarThread {
    const thread: GrammarThread = new GrammarThread(this.#data, {
      onReply: (reply) => this.#onReply(thread, reply),
      onExit: (why) => {
        if (thread === this.#thread) this.#lose(lost(why));
      },
    });
    return thread;
  }

  #onReply(thread: GrammarThread, reply: Exclude<GrammarThreadReply, { kind: 'ready' }>): void {
    if (thread !== this.#thread) return;
    switch (reply.kind) {
      case 'created':
      case 'refused': {
        const creating = this.#creating.get(reply.id);
        if (creating === undefined) return;
        this.#creating.delete(reply.id);
        thread.release();
        if (reply.kind === 'created') {
          this.#numLive++;
          creating.resolve({ id: reply.id, generation: this.#generation });
        } else {
          creating.reject(new GrammarError(`the grammar did not compile: ${reply.message}`));
          this.#maybeIdle();
        }
        return;
      }
      case 'stepped': {
        const batch = this.#sent.shift() ?? [];
        thread.release();
        answer(batch, reply.results);
        this.#maybeIdle();
        return;
      }
      case 'trapped':
        if (this.#keepTrapped) {
          // The negative control: the broken instance stays; only the request at hand fails now.
          const creating = reply.id === null ? undefined : this.#creating.get(reply.id);
          if (reply.id !== null) this.#creating.delete(reply.id);
          const batch = creating === undefined ? this.#sent.shift() : undefined;
          thread.release();
          creating?.reject(new GrammarError(`the grammar engine trapped: ${reply.message}`));
          for (const waiter of batch ?? [])
            waiter.reject(new GrammarError(`the grammar engine trapped: ${reply.message}`));
          return;
        }
        this.#lose(lost(`its grammar thread trapped (${reply.message}) and was restarted`));
        void thread.terminate();
        return;
      case 'checked':
        return;
    }
  }

  /** The thread is gone: every request with a matcher or a question on it fails; a new generation starts. */
  #lose(error: GrammarError, died = true): void {
    this.#thread = undefined;
    this.#generation++;
    if (died) this.#restarts++;
    this.#numLive = 0;
    for (const creating of this.#creating.values()) creating.reject(error);
    this.#creating.clear();
    for (const batch of this.#sent.splice(0)) for (const waiter of batch) waiter.reject(error);
    for (const waiter of this.#batch.splice(0)) waiter.reject(error);
    if (died) this.#onIdle?.();
  }
}

function answer(batch: readonly StepWaiter[], results: readonly StepResult[]): void {
  const byId = new Map(results.map((r) => [r.id, r]));
  for (const waiter of batch) {
    const result = byId.get(waiter.id);
    if (result?.mask !== undefined)
      waiter.resolve({ mask: result.mask, terminated: result.terminated, draftMasks: result.draftMasks ?? [] });
    else waiter.reject(new GrammarError(result?.error ?? 'the grammar thread did not answer for this request'));
  }
}

function lost(why: string): GrammarError {
  return new GrammarError(`this request's structured output was lost: ${why}`);
}
