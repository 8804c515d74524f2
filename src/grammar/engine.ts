// GrammarEngine: structured-output specs -> compiled grammars -> per-request TokenConstraints,
// over one model's vocabulary. Owns the xgrammar tokenizer info, the compiler and a bounded
// cache of compiled grammars (compiling costs tens to hundreds of ms; requests with the same
// schema share one). Everything starts lazily, on the first constrained request.
//   json_object -> xgrammar's built-in JSON grammar, with a root that must be an object
//   json_schema -> xgrammar's JSON-schema converter: compact separators, no free whitespace
//                  (so a model cannot spin on spaces), strict (no properties beyond the schema's);
//                  json_object is the schema {type: object}, not strict
// Must never share a matcher between requests, or let the cache grow without bound.
import { constraintKey, InvalidRequestError, type ConstraintSpec } from '../core/index.js';
import { GrammarError, TokenConstraint } from './constraint.js';
import type { GrammarVocab } from './vocab.js';
import { loadXgrammar, type XgrammarModule } from './xgrammar.js';

type Compiler = Awaited<ReturnType<XgrammarModule['GrammarCompiler']['createGrammarCompiler']>>;
type Compiled = Awaited<ReturnType<Compiler['compileBuiltinJSONGrammar']>>;

/** At most this many compiled grammars are kept (least recently used goes first). */
export const GRAMMAR_CACHE_SIZE = 32;

/** json_object: any JSON whose top level is an object. */
const JSON_OBJECT_SCHEMA = JSON.stringify({ type: 'object' });

export class GrammarEngine {
  readonly vocab: GrammarVocab;
  readonly #load: () => XgrammarModule;
  #started: Promise<{ readonly xg: XgrammarModule; readonly compiler: Compiler }> | undefined;
  readonly #cache = new Map<string, Promise<Compiled>>();

  constructor(vocab: GrammarVocab, load: () => XgrammarModule = loadXgrammar) {
    this.vocab = vocab;
    this.#load = load;
  }

  /** Width of every mask in 32-bit words. */
  get maskWords(): number {
    return Math.ceil(this.vocab.numLogits / 32);
  }

  /** null when `spec` compiles; else an InvalidRequestError naming `param`. */
  async check(spec: ConstraintSpec, param: string): Promise<InvalidRequestError | null> {
    try {
      await this.#compiled(spec);
      return null;
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      return new InvalidRequestError(
        `\`${param}\`: the schema is not one Tessera can enforce: ${why.slice(0, 300)}`,
        param,
      );
    }
  }

  /** A fresh constraint for one request; it becomes usable once its prepare() resolves. */
  constraint(spec: ConstraintSpec): TokenConstraint {
    return new TokenConstraint(
      this.#compiled(spec).then(async (compiled) => {
        const { xg } = await this.#start();
        return xg.GrammarMatcher.createGrammarMatcher(compiled, [...this.vocab.stopTokenIds]);
      }),
    );
  }

  #start(): Promise<{ readonly xg: XgrammarModule; readonly compiler: Compiler }> {
    this.#started ??= (async () => {
      const xg = this.#load();
      const { pieces, vocabType, prependSpace, numLogits, stopTokenIds } = this.vocab;
      const info = await xg.TokenizerInfo.createTokenizerInfo([...pieces], vocabType, prependSpace, numLogits, [
        ...stopTokenIds,
      ]);
      const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
      return { xg, compiler };
    })();
    return this.#started;
  }

  #compiled(spec: ConstraintSpec): Promise<Compiled> {
    const key = constraintKey(spec);
    const hit = this.#cache.get(key);
    if (hit !== undefined) {
      this.#cache.delete(key);
      this.#cache.set(key, hit); // most recently used last
      return hit;
    }
    const compiled = this.#start().then(({ compiler }) => {
      const schema = spec.kind === 'json_object' ? JSON_OBJECT_SCHEMA : spec.schema;
      try {
        // anyWhitespace false, indent -1 (none), compact separators; strict for schemas (for
        // json_object, {type: object} strictly would allow only `{}`).
        return compiler.compileJSONSchema(schema, false, -1, [',', ':'], spec.kind === 'json_schema');
      } catch (error) {
        throw new GrammarError(error instanceof Error ? error.message : String(error), error);
      }
    });
    compiled.catch(() => this.#cache.delete(key)); // a failure is not cached
    this.#cache.set(key, compiled);
    while (this.#cache.size > GRAMMAR_CACHE_SIZE) {
      const oldest = this.#cache.keys().next().value as string;
      const evicted = this.#cache.get(oldest);
      this.#cache.delete(oldest);
      void evicted?.then(
        (c) => c.dispose(),
        () => undefined,
      );
    }
    return compiled;
  }
}
