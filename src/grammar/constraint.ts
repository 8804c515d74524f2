// TokenConstraint: one request's grammar state. The sampler asks it which tokens may come next
// (a bitmask over the logits: bit id%32 of word id>>5), and it is told every token the request
// emits. Why a replay queue: the matcher is built asynchronously (compiling a schema takes
// tens to hundreds of ms), while tokens may arrive before it is ready (a PD decode node learns
// the first token from KvDone); they are accepted in order once it is.
// Must never hand out a mask older than the last accepted token: mask() before prepare()
// finished for the current state is a broken invariant.
import { InvariantError, TesseraError } from '../core/index.js';
import type { XgrammarModule } from './xgrammar.js';

type Matcher = Awaited<ReturnType<XgrammarModule['GrammarMatcher']['createGrammarMatcher']>>;

export class GrammarError extends TesseraError {
  override name = 'GrammarError' as const;
  constructor(message: string, cause?: unknown) {
    super('internal', `structured output: ${message}`, { cause });
  }
}

export class TokenConstraint {
  readonly #ready: Promise<Matcher | undefined>;
  #matcher: Matcher | undefined;
  readonly #pending: number[] = [];
  #mask: Int32Array | undefined;
  #error: TesseraError | undefined;
  #disposed = false;
  #numAccepted = 0;

  constructor(matcher: Promise<Matcher>) {
    this.#ready = matcher.then(
      (m) => {
        if (this.#disposed) m.dispose();
        else this.#matcher = m;
        return m;
      },
      (error: unknown) => {
        this.#error = error instanceof TesseraError ? error : new GrammarError('the grammar did not compile', error);
        return undefined;
      },
    );
  }

  /** Tokens accepted so far (including those queued for replay). */
  get numAccepted(): number {
    return this.#numAccepted;
  }

  /** The request emitted `token`: advance (now, or on replay once the matcher is ready). */
  accept(token: number): void {
    this.#numAccepted++;
    this.#mask = undefined;
    if (this.#matcher === undefined) this.#pending.push(token);
    else this.#acceptNow(this.#matcher, token);
  }

  /** Make mask() valid for the current state. Rejects when the grammar failed or refused a token. */
  async prepare(): Promise<void> {
    if (this.#disposed) throw new InvariantError('prepare() on a disposed constraint');
    const matcher = await this.#ready;
    if (matcher === undefined) throw this.#error ?? new GrammarError('the grammar did not compile');
    if (this.#disposed) return;
    while (this.#pending.length > 0) this.#acceptNow(matcher, this.#pending.shift() as number);
    if (this.#error !== undefined) throw this.#error;
    if (this.#mask === undefined) this.#mask = await matcher.getNextTokenBitmask();
  }

  /** The tokens allowed next; valid only after prepare() for the current state. */
  mask(): Int32Array {
    if (this.#error !== undefined) throw this.#error;
    if (this.#mask === undefined) throw new InvariantError('a constraint mask was asked for before it was prepared');
    return this.#mask;
  }

  /** Whether the output is complete (the matcher accepted a stop token). */
  get isTerminated(): boolean {
    return this.#matcher?.isTerminated() ?? false;
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#matcher?.dispose();
    this.#matcher = undefined;
  }

  #acceptNow(matcher: Matcher, token: number): void {
    if (this.#error !== undefined) return;
    if (!matcher.acceptToken(token)) this.#error = new GrammarError(`token ${token} does not continue the grammar`);
  }
}
