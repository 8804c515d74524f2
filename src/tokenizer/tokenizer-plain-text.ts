// User text is text: special-token strings a user writes (`<|im_start|>`, `<|end_of_text|>`) are
// encoded as the plain characters they are, never as the control tokens, so no message can open a
// turn or end one; only the chat template emits control tokens (as vLLM and llama-server do for
// chat). How:
//   1. before rendering, every user string (content, tool calls, tool schemas) is escaped: each
//      special token's text in it gets PLAIN_MARK after its first character (and a PLAIN_MARK the
//      user sent is doubled), so no special token's text survives in it;
//   2. the template renders as usual (trim, split, tojson behave as on the original text);
//   3. encodeRendered splits the rendered text at added tokens (now only the template's own), then
//      removes the marks from the text between them and encodes that text with no special-token
//      parsing. A rendered text with no mark is encoded exactly as before, so every prompt without
//      special-token text keeps its ids bit for bit.
// It must never let a mark reach the model's vocabulary, or a user's special-token text become a
// special token (unless the `parse-special-in-content` fault point skips step 1; tests only).

/** U+FDD0, a Unicode noncharacter: it never occurs in a template's own text. */
export const PLAIN_MARK = '\uFDD0';

/** The parts of @lenml/tokenizers' PreTrainedTokenizer that its own `_encode_text` uses. */
export interface LenmlInternals {
  readonly added_tokens: readonly {
    readonly content: string;
    readonly special: boolean;
    readonly lstrip?: boolean;
    readonly rstrip?: boolean;
  }[];
  readonly added_tokens_splitter: { split(text: string): string[] };
  readonly added_tokens_map: ReadonlyMap<string, { readonly lstrip?: boolean; readonly rstrip?: boolean }>;
  readonly special_tokens: readonly string[];
  readonly remove_space?: boolean;
  readonly legacy?: boolean;
  readonly normalizer: ((text: string) => string) | null;
  readonly pre_tokenizer: ((text: string, options: { section_index: number }) => string[]) | null;
  readonly model: ((pieces: string[]) => string[]) & { convert_tokens_to_ids(tokens: string[]): number[] };
  readonly post_processor:
    ((tokens: string[], pair: null, options: { add_special_tokens: boolean }) => { tokens: string[] }) | null;
}

/** A matcher for the special tokens' texts (two characters or more: a mark fits inside). */
export function specialTokenPattern(inner: LenmlInternals): RegExp | null {
  const texts = inner.added_tokens.filter((t) => t.special && [...t.content].length >= 2).map((t) => t.content);
  if (texts.length === 0) return null;
  texts.sort((a, b) => b.length - a.length); // the longest first, as the library's splitter matches
  return new RegExp(texts.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'gu');
}

/** Step 1: `text` with no special token's text left in it (linear: each pass breaks every match). */
export function escapePlain(text: string, pattern: RegExp | null): string {
  let out = text.includes(PLAIN_MARK) ? text.replaceAll(PLAIN_MARK, PLAIN_MARK + PLAIN_MARK) : text;
  if (pattern === null) return out;
  // A mark inside a match can only break matches; a second pass finds any that overlapped one.
  for (let pass = 0; pass < 4; pass++) {
    pattern.lastIndex = 0;
    if (!pattern.test(out)) return out;
    out = out.replace(pattern, (token) => {
      const first = String.fromCodePoint(token.codePointAt(0) as number);
      return first + PLAIN_MARK + token.slice(first.length);
    });
  }
  return out;
}

/** The user's text back: a doubled mark is one the user sent, a single one was ours. */
export function unescapePlain(text: string): string {
  if (!text.includes(PLAIN_MARK)) return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== PLAIN_MARK) out += text[i];
    else if (text[i + 1] === PLAIN_MARK) {
      out += PLAIN_MARK;
      i++;
    }
  }
  return out;
}

/** Every string in a JSON value (keys too) escaped: a tool's schema is user text. */
export function escapeJson(value: unknown, escape: (text: string) => string): unknown {
  if (typeof value === 'string') return escape(value);
  if (Array.isArray(value)) return value.map((v) => escapeJson(v, escape));
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [escape(k), escapeJson(v, escape)]));
  return value;
}

const SPIECE_UNDERLINE = '\u2581';

/**
 * Step 3: the library's `_encode_text` and post-processing, but the text between added tokens is
 * unescaped and never parsed for special tokens. Only called for text that holds a mark.
 */
export function encodeMarked(
  inner: LenmlInternals,
  rendered: string,
  addSpecialTokens: boolean,
  nonLegacyLlama: boolean,
): number[] {
  // LlamaTokenizer (legacy: false) prefixes the whole text with '▁' and reads '▁' as a space.
  const text = nonLegacyLlama ? SPIECE_UNDERLINE + rendered.replaceAll(SPIECE_UNDERLINE, ' ') : rendered;
  // Marks never belong to a token, so every section the splitter matched is a template's token.
  const sections = inner.added_tokens_splitter.split(text);
  const isToken = sections.map((s) => inner.added_tokens_map.has(s));
  for (let i = 0; i < sections.length; i++) {
    const added = isToken[i] ? inner.added_tokens_map.get(sections[i] as string) : undefined;
    if (added === undefined) continue;
    if (added.lstrip && i > 0 && !isToken[i - 1]) sections[i - 1] = (sections[i - 1] as string).trimEnd();
    if (added.rstrip && i < sections.length - 1 && !isToken[i + 1])
      sections[i + 1] = (sections[i + 1] as string).trimStart();
  }
  let tokens = sections.flatMap((section, sectionIndex) => {
    if (section.length === 0) return [];
    if (isToken[sectionIndex]) return [section];
    let x = unescapePlain(section);
    if (inner.remove_space === true) x = x.trim().split(/\s+/).join(' ');
    if (inner.normalizer !== null) x = inner.normalizer(x);
    if (x.length === 0) return [];
    const pieces = inner.pre_tokenizer !== null ? inner.pre_tokenizer(x, { section_index: sectionIndex }) : [x];
    return inner.model(pieces);
  });
  if (
    nonLegacyLlama &&
    tokens.length > 1 &&
    tokens[0] === SPIECE_UNDERLINE &&
    inner.special_tokens.includes(tokens[1]!)
  )
    tokens = tokens.slice(1);
  const processed = inner.post_processor
    ? inner.post_processor(tokens, null, { add_special_tokens: addSpecialTokens }).tokens
    : tokens;
  return inner.model.convert_tokens_to_ids(processed);
}
