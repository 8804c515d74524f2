// tokenizer.test.ts: the demo model's tokenizer (models/austen), loaded with
// @lenml/tokenizers exactly as Tessera tokenizes, gives back every text it is handed
// and agrees with the ids stored in reference-logits.json. It must never mock or
// re-implement the tokenizer: the point is to test the code that runs in production.
// (The whole training corpus is round-tripped by tools/train-demo/encode-corpus.mjs
// when the ids are made; the corpus is not committed, so CI checks these texts.)
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { TokenizerLoader } from '@lenml/tokenizers';

const MODEL_DIR = new URL('../../models/austen/', import.meta.url);
const readJson = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(name, MODEL_DIR), 'utf8')) as Record<string, unknown>;

const tokenizerJSON = readJson('tokenizer.json');
const tokenizerConfig = readJson('tokenizer_config.json');
const config = readJson('config.json') as { vocab_size: number; bos_token_id: number; eos_token_id: number };

function load(configOverrides: Record<string, unknown> = {}) {
  return TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig: { ...tokenizerConfig, ...configOverrides } });
}

const tokenizer = load();

/** encode as Tessera does (BOS added), decode without special tokens. */
function roundTrip(text: string, tok = tokenizer): string {
  return tok.decode(tok.encode(text), { skip_special_tokens: true });
}

const TRICKY = [
  '',
  ' ',
  '\n',
  '\n\n\n',
  '   leading and trailing   ',
  'a          b\t\t\tc',
  '\r\nWindows\r\nlines\r\n',
  ' \n \n  \n',
  'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.',
  '"My dear Mr. Bennet," said his lady to him one day, "have you heard that Netherfield Park is let at last?"',
  "don't, won't, she'll, we've, I'm, you're, it's, 'd 'll 'S",
  'Hello , world ! Spaces before punctuation .',
  '£20,000 — “curly quotes” ‘single’ … naïve café résumé',
  'e\u0301 (combining accent) \u00e9 (precomposed)',
  'emoji 👋🏽 family 👨‍👩‍👧‍👦 flags 🇬🇧🇫🇷 and 🙂',
  '日本語のテキスト, 中文, 한국어, العربية, עברית, русский',
  '\uFEFFbyte order mark at the start',
  'zero\u200Bwidth\u200Cjoiners\u200D and \u0000 NUL and \u007F DEL',
  '1234567890 3.14159 -42 1e10 0x1F',
  'tabs\tand\u00A0no-break\u2003em spaces',
  '_emphasis_ and --dashes-- and ***',
];

describe('the austen tokenizer as @lenml/tokenizers loads it', () => {
  it('has the vocabulary size and special token ids that config.json declares', () => {
    const vocab = (tokenizerJSON.model as { vocab: Record<string, number> }).vocab;
    expect(Object.keys(vocab).length).toBe(config.vocab_size);
    expect(tokenizer.bos_token_id).toBe(config.bos_token_id);
    expect(tokenizer.eos_token_id).toBe(config.eos_token_id);
  });

  it('puts exactly one BOS in front when special tokens are added, and none otherwise', () => {
    const withBos = tokenizer.encode('It is a truth');
    const without = tokenizer.encode('It is a truth', { add_special_tokens: false });
    expect(withBos).toEqual([config.bos_token_id, ...without]);
    expect(without).not.toContain(config.bos_token_id);
    expect(tokenizer.encode('')).toEqual([config.bos_token_id]);
  });

  it.each(TRICKY.map((text) => [JSON.stringify(text).slice(0, 50), text]))('round-trips %s exactly', (_, text) => {
    expect(roundTrip(text)).toBe(text);
    const ids = tokenizer.encode(text, { add_special_tokens: false });
    if (ids.length > 0) expect(tokenizer.decode(ids)).toBe(text);
  });

  it('round-trips any well-formed unicode string (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 64 }), (text) => roundTrip(text) === text),
      { numRuns: 300, seed: 6 },
    );
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 32 }), (text) => roundTrip(text) === text),
      { numRuns: 300, seed: 7 },
    );
  });

  it('turns the literal text of a special token into that token (callers must escape user text if that matters)', () => {
    expect(tokenizer.encode('a<|begin_of_text|>b', { add_special_tokens: false })).toContain(config.bos_token_id);
    expect(tokenizer.encode('a<|end_of_text|>b', { add_special_tokens: false })).toContain(config.eos_token_id);
  });

  it('needs clean_up_tokenization_spaces off: with it on, decoding loses spaces (negative control)', () => {
    const text = 'Hello , world ! Spaces before punctuation .';
    expect(roundTrip(text)).toBe(text);
    expect(roundTrip(text, load({ clean_up_tokenization_spaces: true }))).not.toBe(text);
  });
});

describe('reference-logits.json against the tokenizer', () => {
  const reference = readJson('reference-logits.json') as {
    format: string;
    cases: {
      name: string;
      prompt: string;
      prompt_ids: number[];
      greedy_ids: number[];
      greedy_text: string;
      last_logits: number[];
    }[];
  };

  it('is the documented format with at least three cases', () => {
    expect(reference.format).toBe('tessera-reference-logits/1');
    expect(reference.cases.length).toBeGreaterThanOrEqual(3);
  });

  it.each(reference.cases.map((c) => [c.name, c]))(
    '%s: prompt_ids are encode(prompt) and greedy_text is decode(greedy_ids)',
    (_, c) => {
      expect(tokenizer.encode(c.prompt)).toEqual(c.prompt_ids);
      expect(c.greedy_ids).toHaveLength(32);
      expect(tokenizer.decode(c.greedy_ids)).toBe(c.greedy_text);
      expect(c.last_logits).toHaveLength(config.vocab_size);
      expect(c.last_logits.every((x) => Number.isFinite(x))).toBe(true);
    },
  );
});
