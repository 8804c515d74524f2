// TokenConstraint: one request's grammar state, as the step loop sees it. The sampler asks it
// which tokens may come next (a bitmask over the logits: bit id%32 of word id>>5), and it is
// told every token the request emits. The matcher itself lives on the matcher thread
// (matchers.ts); this proxy keeps the tokens accepted since the last mask and sends them with
// the next mask request, so one step costs one round trip for all its constrained requests.
// Why a replay queue: the matcher is built asynchronously (the checker compiles, then the matcher
// thread), while tokens may arrive before it is ready (a PD decode node learns the first token
// from KvDone); they are sent in order with the first mask request.
// Speculative decoding: prepare(drafts) also fetches the mask after each draft the grammar
// accepts (draftMasks), made on the matcher thread, which then rolls the drafts back, so the
// matcher stays where the accepted output is; the tokens verification accepts reach it through
// accept() like any others.
// Must never hand out a mask older than the last accepted token: mask() before prepare()
// finished for the current state is a broken invariant, and so is draftMasks() for drafts other
// than the ones it was prepared with.
import { InvariantError, TesseraError } from '../core/index.js';
import { GrammarError } from './grammar-error.js';
import type { MatcherHandle, Matchers } from './matchers.js';

export class TokenConstraint {
  readonly #ready: Promise<MatcherHandle | undefined>;
  #handle: MatcherHandle | undefined;
  #matchers: Matchers | undefined;
  readonly #pending: number[] = [];
  #mask: Int32Array | undefined;
  /** The masks after each draft of #maskDrafts the grammar accepted (with #mask, one state). */
  #draftMasks: readonly Int32Array[] = [];
  #maskDrafts: readonly number[] = [];
  #terminated = false;
  #error: TesseraError | undefined;
  #disposed = false;
  #numAccepted = 0;
  #preparing: Promise<void> | undefined;

  /** `created`: the matcher, once the schema was checked and compiled; rejects with the request's error. */
  constructor(created: Promise<{ readonly handle: MatcherHandle; readonly matchers: Matchers }>) {
    this.#ready = created.then(
      ({ handle, matchers }) => {
        if (this.#disposed) matchers.dispose(handle);
        this.#matchers = matchers;
        this.#handle = handle;
        return handle;
      },
      (error: unknown) => {
        this.#error = error instanceof TesseraError ? error : new GrammarError('the grammar did not compile', error);
        return undefined;
      },
    );
  }

  /** Tokens accepted so far (including those not yet sent to the matcher). */
  get numAccepted(): number {
    return this.#numAccepted;
  }

  /** The request emitted `token`: it reaches the matcher with the next prepare(). */
  accept(token: number): void {
    this.#numAccepted++;
    this.#mask = undefined;
    this.#pending.push(token);
  }

  /**
   * Make mask() valid for the current state, and draftMasks(drafts) for a speculative step's
   * drafts. Rejects when the grammar failed or refused a token.
   */
  async prepare(drafts: readonly number[] = []): Promise<void> {
    if (this.#disposed) throw new InvariantError('prepare() on a disposed constraint');
    while (this.#mask === undefined || !sameTokens(this.#maskDrafts, drafts)) {
      this.#preparing ??= this.#prepareNow(drafts).finally(() => (this.#preparing = undefined));
      await this.#preparing;
      if (this.#disposed) return;
    }
  }

  /** The tokens allowed next; valid only after prepare() for the current state. */
  mask(): Int32Array {
    if (this.#error !== undefined) throw this.#error;
    if (this.#mask === undefined) throw new InvariantError('a constraint mask was asked for before it was prepared');
    return this.#mask;
  }

  /**
   * Row j's mask of a speculative step (j >= 1: after d1..dj), for each draft the grammar accepted:
   * fewer than `drafts` when it refused one (that draft is rejected under the mask before it).
   * Valid only after prepare(drafts) for the current state.
   */
  draftMasks(drafts: readonly number[]): readonly Int32Array[] {
    this.mask();
    if (!sameTokens(this.#maskDrafts, drafts))
      throw new InvariantError('draft masks were asked for drafts they were not prepared for');
    return this.#draftMasks;
  }

  /** Whether the output is complete (the matcher accepted a stop token), as of the last prepare(). */
  get isTerminated(): boolean {
    return this.#terminated;
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#handle !== undefined) this.#matchers?.dispose(this.#handle);
  }

  async #prepareNow(drafts: readonly number[]): Promise<void> {
    const handle = await this.#ready;
    if (handle === undefined || this.#matchers === undefined)
      throw this.#error ?? new GrammarError('the grammar did not compile');
    if (this.#error !== undefined) throw this.#error;
    if (this.#disposed) return;
    const tokens = this.#pending.splice(0);
    const numAccepted = this.#numAccepted;
    try {
      const reply = await this.#matchers.step(handle, tokens, drafts);
      this.#terminated = reply.terminated;
      // A token accepted while the mask was on its way makes it stale: the next prepare() asks again.
      if (this.#numAccepted === numAccepted) {
        this.#mask = reply.mask;
        this.#draftMasks = reply.draftMasks;
        this.#maskDrafts = [...drafts];
      }
    } catch (error) {
      this.#error = error instanceof TesseraError ? error : new GrammarError('the grammar failed', error);
      throw this.#error;
    }
  }
}

function sameTokens(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}
