// The Tokenizer every other module uses: text <-> token ids, plus an incremental detokenizer
// for streaming. One implementation, over @lenml/tokenizers (a port of transformers.js), built
// from a tokenizer.json + tokenizer_config.json pair, either read from a Hugging Face directory
// or synthesized from a GGUF's embedded vocabulary (gguf-tokenizer.ts).
// Chat prompts are encoded with encodeRendered: the template's control tokens are special, the
// user's text (escaped with escapePlain before rendering) is plain (tokenizer-plain-text.ts).
// It must never emit a partial UTF-8 character while streaming: bytes are held back until
// they complete a character (or until flush() at the end of a stream).
import { TokenizerLoader } from '@lenml/tokenizers';
import { ModelLoadError } from '../core/index.js';
import type { JsonObject } from '../formats/index.js';
import { ScopedWordCaches, type WordCache } from './word-cache.js';
import {
  encodeMarked,
  escapePlain,
  PLAIN_MARK,
  specialTokenPattern,
  type LenmlInternals,
} from './tokenizer-plain-text.js';

export interface EncodeOptions {
  /** Add what the tokenizer adds around a sequence (usually BOS). Default true. */
  readonly addSpecialTokens?: boolean;
  /**
   * Whose word cache this encode may read and fill: the request's tenant (word-cache.ts). Absent:
   * a cache of this call's own, so no other encode can tell what it held.
   */
  readonly cacheScope?: string;
}

export interface DecodeOptions {
  /** Drop BOS/EOS and other special tokens from the text. Default false. */
  readonly skipSpecialTokens?: boolean;
}

export interface DetokenizerOptions extends DecodeOptions {
  /**
   * Ids before the first streamed one (the prompt): they are never emitted, but give the
   * first streamed token its context, e.g. its leading space in SentencePiece vocabularies.
   */
  readonly contextIds?: readonly number[];
}

/** Streams text for one sequence of generated ids. */
export interface IncrementalDetokenizer {
  /** Add one id; returns the text it completes ('' while bytes are held back). */
  push(id: number): string;
  /** End of stream: whatever is still held back (an incomplete character becomes U+FFFD). */
  flush(): string;
}

export interface Tokenizer {
  /** What it was built from: a tokenizer thread builds the same one (tokenizer-pool.ts). */
  readonly sources: TokenizerSources;
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly eosTokenIds: readonly number[];
  /** Text of the BOS/EOS tokens, for chat templates. */
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  /** Encodes `text`; any special token's text in it becomes that special token (completions' prompts). */
  encode(text: string, options?: EncodeOptions): number[];
  /** A user's string made safe to render: no special token's text left in it (undone by encodeRendered). */
  escapePlain(text: string): string;
  /**
   * Encodes a rendered chat whose user strings went through escapePlain: the template's special
   * tokens are special, the user's text is plain text. Without escaped text: exactly `encode`.
   */
  encodeRendered(text: string, options?: EncodeOptions): number[];
  decode(ids: readonly number[], options?: DecodeOptions): string;
  /** The raw vocabulary piece of one id, or null outside the vocabulary. */
  tokenPiece(id: number): string | null;
  createDetokenizer(options?: DetokenizerOptions): IncrementalDetokenizer;
  /** Whether `scope`'s word cache holds a word containing `text` (tests of the per-tenant caches). */
  wordCacheHolds(scope: string, text: string): boolean;
}

/** How many context ids a detokenizer keeps before the first streamed one. */
const DETOKENIZER_CONTEXT_IDS = 5;

interface LenmlTokenizer extends LenmlInternals {
  encode(text: string, options: { add_special_tokens: boolean }): number[];
  decode(ids: number[], options: { skip_special_tokens: boolean }): string;
  readonly model: LenmlInternals['model'] & {
    readonly vocab: readonly (string | undefined)[];
    readonly tokens_to_ids: ReadonlyMap<string, number>;
  };
  readonly bos_token: string | null;
  readonly eos_token: string | null;
}

export interface TokenizerSources {
  readonly tokenizerJson: JsonObject;
  readonly tokenizerConfig: JsonObject;
  /** Named in errors. */
  readonly file: string;
  /** Extra ids that end generation (from config.json / generation_config.json / GGUF). */
  readonly extraEosTokenIds?: readonly number[];
  readonly fallbackBosTokenId?: number | null;
}

export function createTokenizer(sources: TokenizerSources): Tokenizer {
  let inner: LenmlTokenizer;
  try {
    inner = TokenizerLoader.fromPreTrained({
      tokenizerJSON: sources.tokenizerJson as never,
      tokenizerConfig: sources.tokenizerConfig as never,
    }) as unknown as LenmlTokenizer;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new ModelLoadError(sources.file, `cannot build the tokenizer: ${why}`, error);
  }
  return new HfTokenizer(inner, sources);
}

class HfTokenizer implements Tokenizer {
  readonly #inner: LenmlTokenizer;
  readonly sources: TokenizerSources;
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly eosTokenIds: readonly number[];
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly #specialPattern: RegExp | null;
  readonly #nonLegacyLlama: boolean;
  readonly #wordCaches = new ScopedWordCaches();

  constructor(inner: LenmlTokenizer, sources: TokenizerSources) {
    this.#inner = inner;
    this.sources = sources;
    this.#specialPattern = specialTokenPattern(inner);
    // Only LlamaTokenizer reads `legacy` (default true); the base class sets it false and ignores it.
    const tokenizerClass = String(sources.tokenizerConfig['tokenizer_class'] ?? '').replace(/Fast$/, '');
    this.#nonLegacyLlama = tokenizerClass === 'LlamaTokenizer' && inner.legacy === false;
    const extraEos = sources.extraEosTokenIds ?? [];
    const fallbackBos = sources.fallbackBosTokenId ?? null;
    this.vocabSize = inner.model.vocab.length;
    const idOf = (token: string | null): number | null =>
      token === null ? null : (inner.model.tokens_to_ids.get(token) ?? null);
    this.bosTokenId = idOf(inner.bos_token) ?? fallbackBos;
    const eos = idOf(inner.eos_token);
    this.eosTokenIds = [...new Set([...(eos === null ? [] : [eos]), ...extraEos])];
    this.bosToken = this.bosTokenId === null ? null : this.tokenPiece(this.bosTokenId);
    this.eosToken = this.eosTokenIds.length === 0 ? null : this.tokenPiece(this.eosTokenIds[0]!);
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    this.#useWordCache(options.cacheScope);
    return this.#inner.encode(text, { add_special_tokens: options.addSpecialTokens ?? true });
  }

  escapePlain(text: string): string {
    return escapePlain(text, this.#specialPattern);
  }

  encodeRendered(text: string, options: EncodeOptions = {}): number[] {
    if (!text.includes(PLAIN_MARK)) return this.encode(text, options);
    this.#useWordCache(options.cacheScope);
    return encodeMarked(this.#inner, text, options.addSpecialTokens ?? true, this.#nonLegacyLlama);
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    // Ids outside the vocabulary (padding rows of a larger embedding) have no text.
    const known = ids.filter((id) => Number.isInteger(id) && id >= 0 && id < this.vocabSize);
    if (known.length === 0) return ''; // the library rejects an empty list
    return this.#inner.decode(known, { skip_special_tokens: options.skipSpecialTokens ?? false });
  }

  tokenPiece(id: number): string | null {
    return this.#inner.model.vocab[id] ?? null;
  }

  createDetokenizer(options: DetokenizerOptions = {}): IncrementalDetokenizer {
    return new WindowDetokenizer(this, options);
  }

  /** Whether `scope`'s word cache holds a word containing `text` (tests). */
  wordCacheHolds(scope: string, text: string): boolean {
    return this.#wordCaches.holds(scope, text);
  }

  /** The model memoises split words in `model.cache` (BPE models): point it at the scope's own. */
  #useWordCache(scope: string | undefined): void {
    const model = this.#inner.model as unknown as { cache?: WordCache };
    if (model.cache !== undefined) model.cache = this.#wordCaches.cacheFor(scope);
  }
}

/**
 * The window method: decode ids[prefix..read) and ids[prefix..end) and emit the difference,
 * unless the longer text ends in U+FFFD (an incomplete UTF-8 sequence: hold it back). Decoding
 * a window rather than single ids keeps what decoders do across tokens (leading-space strips,
 * byte fallback, byte-level merges) exactly as a whole-sequence decode does.
 */
class WindowDetokenizer implements IncrementalDetokenizer {
  readonly #tokenizer: Tokenizer;
  readonly #options: DecodeOptions;
  /** ids[0..read) were emitted (or are context); ids[0] is the window start. */
  #ids: number[];
  #read: number;

  constructor(tokenizer: Tokenizer, options: DetokenizerOptions) {
    this.#tokenizer = tokenizer;
    this.#options = { skipSpecialTokens: options.skipSpecialTokens ?? false };
    this.#ids = (options.contextIds ?? []).slice(-DETOKENIZER_CONTEXT_IDS);
    this.#read = this.#ids.length;
  }

  push(id: number): string {
    this.#ids.push(id);
    return this.#emit(false);
  }

  flush(): string {
    return this.#emit(true);
  }

  #emit(force: boolean): string {
    const prefix = this.#tokenizer.decode(this.#ids.slice(0, this.#read), this.#options);
    const full = this.#tokenizer.decode(this.#ids, this.#options);
    if (full.length <= prefix.length || (!force && full.endsWith('\uFFFD'))) return '';
    const text = full.slice(prefix.length);
    this.#ids = this.#ids.slice(this.#read);
    this.#read = this.#ids.length;
    return text;
  }
}
