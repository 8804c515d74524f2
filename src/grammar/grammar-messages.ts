// The messages between the main thread and a grammar thread (grammar-thread-main.ts), both roles:
//   checker: compiles a schema once, tries its first mask, drops it; holds no matcher, so a trap
//            or a timeout costs only the schema being checked (checker.ts is the main side)
//   matcher: compiles approved schemas (cached per tenant and schema) and owns every matcher;
//            a step's masks go in one message and come back in one (matchers.ts is the main side)
// Must never carry anything but ids, tokens, schema text and masks: no compiled grammar crosses
// threads (xgrammar cannot serialize one, so a matcher lives where its grammar was compiled).
import type { GrammarVocab } from './vocab.js';

export type GrammarThreadRole = 'checker' | 'matcher';

export interface GrammarThreadData {
  readonly role: GrammarThreadRole;
  readonly vocab: GrammarVocab;
  /** The matcher thread's compiled-grammar cache, in grammars. */
  readonly cacheSize: number;
  /** Fault point crash-grammar-thread: the matcher thread exits on a schema holding GRAMMAR_CRASH_MARKER. */
  readonly crashOnMarker: boolean;
  /** Fault point skip-grammar-rollback: a speculative step's drafts stay accepted by the matcher. */
  readonly skipRollback: boolean;
}

/** With crash-grammar-thread armed, a schema holding this text ends the matcher thread (tests only). */
export const GRAMMAR_CRASH_MARKER = 'tessera-crash-grammar-thread';

/** A schema to compile: xgrammar's JSON-schema text, strict (json_schema) or not (json_object). */
export interface GrammarSource {
  readonly schema: string;
  readonly strict: boolean;
}

export type GrammarThreadRequest =
  | { readonly kind: 'check'; readonly id: number; readonly source: GrammarSource }
  /** Build matcher `id` over the grammar of `source`, compiled once per `key` (tenant and schema). */
  | { readonly kind: 'create'; readonly id: number; readonly key: string; readonly source: GrammarSource }
  /**
   * Per matcher: accept `tokens` in order, then its next mask; with `drafts` (a speculative step),
   * also the mask after each draft the grammar accepts (stopping at the first it refuses), then
   * roll those drafts back: the matcher ends where `tokens` left it.
   */
  | { readonly kind: 'step'; readonly batch: readonly StepAsk[] }
  | { readonly kind: 'dispose'; readonly ids: readonly number[] };

export interface StepAsk {
  readonly id: number;
  readonly tokens: readonly number[];
  readonly drafts?: readonly number[];
}

export interface StepResult {
  readonly id: number;
  /** Absent when `error` is set. */
  readonly mask?: Int32Array;
  /** With drafts: the mask after d1, after d1 d2, ... for each draft the grammar accepted (maybe none). */
  readonly draftMasks?: readonly Int32Array[];
  readonly terminated: boolean;
  /** A token that does not continue the grammar, or a matcher this thread does not hold. */
  readonly error?: string;
}

export type GrammarThreadReply =
  | { readonly kind: 'ready' }
  | { readonly kind: 'checked'; readonly id: number; readonly compileMs: number }
  | { readonly kind: 'created'; readonly id: number }
  /** The schema cannot be enforced (check or create): the request's 400. */
  | { readonly kind: 'refused'; readonly id: number; readonly message: string }
  | { readonly kind: 'stepped'; readonly results: readonly StepResult[] }
  /** The WASM instance trapped (on request `id` when known): it must not be used again. */
  | { readonly kind: 'trapped'; readonly id: number | null; readonly message: string };

/** A WASM trap (out-of-bounds access, unreachable, emscripten's abort): the instance is broken. */
export function isTrap(error: unknown): boolean {
  if (error instanceof Error && error.name === 'RuntimeError') return true; // WebAssembly.RuntimeError
  const message = error instanceof Error ? error.message : String(error);
  return /^Aborted\(|memory access out of bounds|unreachable/.test(message);
}
