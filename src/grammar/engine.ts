// GrammarEngine: structured-output specs -> checked schemas -> per-request TokenConstraints, over
// one model's vocabulary. No compile runs on the calling thread:
//   1. limits: a linear walk of the schema (schema-limits.ts); over a limit -> 400 naming it
//   2. checker: a sacrificial thread compiles the schema under a time budget (checker.ts); a
//      trap or a timeout costs only that request (400) and a rebuilt checker
//   3. matcher threads: compile approved schemas once per tenant and schema and own every
//      matcher (matchers.ts); a grammar that compiled slowly in the checker gets a thread of its
//      own (matcher-pool.ts); TokenConstraint is the step loop's proxy to one matcher
// Approved schemas are remembered per tenant (a bounded LRU), as the matcher thread's compiled
// grammars are: a tenant never learns from a fast answer that another tenant sent a schema.
//   json_object -> the schema {type: object}, not strict
//   json_schema -> compact separators, no free whitespace (a model cannot spin on spaces), strict
// Threads start lazily, on the first constrained request (a router only ever starts the checker).
// Must never share a matcher between requests, compile on the calling thread, or let a cache
// grow without bound.
import {
  constraintKey,
  InvalidRequestError,
  NO_FAULTS,
  TesseraError,
  type ConstraintSpec,
  type FaultSet,
  type TenantId,
} from '../core/index.js';
import { Checker, type CheckOutcome } from './checker.js';
import { TokenConstraint } from './constraint.js';
import type { GrammarSource, GrammarThreadData } from './grammar-messages.js';
import { MatcherPool } from './matcher-pool.js';
import { SCHEMA_LIMITS, schemaOverLimit, type SchemaLimits } from './schema-limits.js';
import type { GrammarVocab } from './vocab.js';

/** The matcher thread keeps at most this many compiled grammars (least recently used goes first). */
export const GRAMMAR_CACHE_SIZE = 32;
/** Approved (tenant, schema) pairs remembered, so a repeated schema skips the checker. */
const APPROVED_SIZE = 1024;

export interface GrammarEngineOptions {
  readonly limits?: SchemaLimits;
  /** The checker's time for one compile; over it the schema is refused. Default 10 s. */
  readonly compileBudgetMs?: number;
  /** Schemas waiting for the checker; more are refused `overloaded`. Default 64. */
  readonly maxQueuedCompiles?: number;
  /** A grammar whose check compiled this slowly gets a matcher thread of its own. Default 250 ms. */
  readonly heavyCompileMs?: number;
  /** At most this many such threads (more heavy grammars share the common one). Default 4. */
  readonly maxHeavyThreads?: number;
  readonly faults?: FaultSet;
}

/** json_object: any JSON whose top level is an object. */
const JSON_OBJECT_SCHEMA = JSON.stringify({ type: 'object' });

export class GrammarEngine {
  readonly vocab: GrammarVocab;
  readonly #limits: SchemaLimits;
  readonly #skipLimits: boolean;
  readonly #shareAcrossTenants: boolean;
  readonly #checker: Checker;
  readonly #matchers: MatcherPool;
  /** Approved keys -> the checker's compile time, least recently used first. */
  readonly #approved = new Map<string, number>();
  /** Checks in flight, so one schema sent twice at once is checked once. */
  readonly #checking = new Map<string, Promise<TesseraError | null>>();
  #numChecked = 0;

  constructor(vocab: GrammarVocab, options: GrammarEngineOptions = {}) {
    const faults = options.faults ?? NO_FAULTS;
    this.vocab = vocab;
    this.#limits = options.limits ?? SCHEMA_LIMITS;
    this.#skipLimits = faults.has('skip-schema-limits');
    this.#shareAcrossTenants = faults.has('share-grammar-cache-across-tenants');
    const keepTrapped = faults.has('keep-trapped-grammar');
    const data = (role: GrammarThreadData['role']): GrammarThreadData => ({
      role,
      vocab,
      cacheSize: GRAMMAR_CACHE_SIZE,
      crashOnMarker: faults.has('crash-grammar-thread'),
      skipRollback: faults.has('skip-grammar-rollback'),
    });
    this.#checker = new Checker({
      data: data('checker'),
      budgetMs: options.compileBudgetMs ?? 10_000,
      maxQueued: options.maxQueuedCompiles ?? 64,
      keepTrapped,
    });
    this.#matchers = new MatcherPool({
      data: data('matcher'),
      keepTrapped,
      // Fault point shared-matcher-thread: no grammar is heavy enough for a thread of its own.
      heavyCompileMs: faults.has('shared-matcher-thread') ? Infinity : (options.heavyCompileMs ?? 250),
      maxHeavyThreads: options.maxHeavyThreads ?? 4,
    });
  }

  /** Width of every mask in 32-bit words. */
  get maskWords(): number {
    return Math.ceil(this.vocab.numLogits / 32);
  }

  /** Matcher threads of their own, held by heavy grammars now. */
  get numHeavyThreads(): number {
    return this.#matchers.numHeavyThreads;
  }

  /** Threads started again after a trap, a timeout or a crash. */
  get restarts(): { readonly checker: number; readonly matcher: number } {
    return { checker: this.#checker.restarts, matcher: this.#matchers.restarts };
  }

  /** Schemas sent to the checker so far (a repeated schema of the same tenant is not sent again). */
  get numChecked(): number {
    return this.#numChecked;
  }

  /**
   * null when `spec` can be enforced for `tenant`; else the error naming `param`: an
   * InvalidRequestError (a limit, a schema xgrammar refuses, traps on or takes too long on)
   * or `overloaded` (too many schemas waiting to be checked).
   */
  check(spec: ConstraintSpec, param: string, tenant: TenantId): Promise<TesseraError | null> {
    const key = this.#keyOf(spec, tenant);
    const compileMs = this.#approved.get(key);
    if (compileMs !== undefined) {
      this.#approved.delete(key);
      this.#approved.set(key, compileMs); // most recently used last
      return Promise.resolve(null);
    }
    const source = sourceOf(spec);
    if (spec.kind === 'json_schema' && !this.#skipLimits) {
      const over = schemaOverLimit(source.schema, param, this.#limits);
      if (over !== null) return Promise.resolve(over);
    }
    let checking = this.#checking.get(key);
    if (checking === undefined) {
      this.#numChecked++;
      checking = this.#checker.check(source).then((outcome) => {
        this.#checking.delete(key);
        if (outcome.kind === 'ok') this.#approve(key, outcome.compileMs);
        return errorOf(outcome, param);
      });
      this.#checking.set(key, checking);
    }
    return checking;
  }

  /** A fresh constraint for one of `tenant`'s requests; usable once its prepare() resolves. */
  constraint(spec: ConstraintSpec, tenant: TenantId, param = 'response_format'): TokenConstraint {
    const key = this.#keyOf(spec, tenant);
    this.#matchers.warm(); // in parallel with the check, on a node's first constrained request
    return new TokenConstraint(
      this.check(spec, param, tenant).then(async (error) => {
        if (error !== null) throw error;
        return this.#matchers.create(key, sourceOf(spec), this.#approved.get(key) ?? 0);
      }),
    );
  }

  /** Ends both threads; constraints still open fail. */
  async close(): Promise<void> {
    await Promise.all([this.#checker.close(), this.#matchers.close()]);
  }

  /** The key of both caches: (tenant, schema); the schema alone under the fault share-grammar-cache-across-tenants. */
  #keyOf(spec: ConstraintSpec, tenant: TenantId): string {
    return this.#shareAcrossTenants ? `*\u0000${constraintKey(spec)}` : `${tenant}\u0000${constraintKey(spec)}`;
  }

  #approve(key: string, compileMs: number): void {
    this.#approved.set(key, compileMs);
    while (this.#approved.size > APPROVED_SIZE) this.#approved.delete(this.#approved.keys().next().value as string);
  }
}

function sourceOf(spec: ConstraintSpec): GrammarSource {
  // json_object is {type: object} not strict (strictly, it would allow only `{}`).
  return spec.kind === 'json_object'
    ? { schema: JSON_OBJECT_SCHEMA, strict: false }
    : { schema: spec.schema, strict: true };
}

function errorOf(outcome: CheckOutcome, param: string): TesseraError | null {
  const refuse = (why: string) => new InvalidRequestError(`\`${param}\`: ${why}`, param);
  switch (outcome.kind) {
    case 'ok':
      return null;
    case 'refused':
      return refuse(`the schema is not one Tessera can enforce: ${outcome.message.slice(0, 300)}`);
    case 'trapped':
      return refuse(
        `the schema is not one Tessera can enforce: the grammar compiler failed on it (${outcome.message.slice(0, 200)})`,
      );
    case 'too-costly':
      return refuse(`the schema is too costly to compile (over ${outcome.budgetMs} ms); a smaller schema is needed.`);
    case 'overloaded':
      return new TesseraError(
        'overloaded',
        `${outcome.numQueued} schemas are waiting to be compiled; try again later.`,
        { param },
      );
    case 'unavailable':
      return new TesseraError('internal', `structured output is unavailable: ${outcome.message}`, { param });
  }
}
