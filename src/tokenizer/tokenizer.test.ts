import { beforeAll, describe, expect, it } from 'vitest';
import { ModelLoadError, Rng } from '../core/index.js';
import { parseJsonObject } from '../formats/index.js';
import { readLlama2Vocab } from '../gen/index.js';
import { createTokenizer, type Tokenizer } from './tokenizer.js';

const TEXTS = [
  'Hello world',
  ' Hello  world\n\nfoo',
  'héllo 😀 日本語',
  'The quick brown fox jumps over the lazy dog.',
  '   leading spaces and trailing   ',
  'tab\tand\r\nCRLF',
  'emoji 🤖🧠 and 数学',
  '',
];

let tokenizer: Tokenizer;
beforeAll(async () => {
  const vocab = await readLlama2Vocab();
  tokenizer = createTokenizer({
    tokenizerJson: parseJsonObject(vocab.tokenizerJsonText, 'tokenizer.json'),
    tokenizerConfig: vocab.tokenizerConfig,
    file: 'tokenizer.json',
  });
});

function stream(ids: readonly number[], options: Parameters<Tokenizer['createDetokenizer']>[0] = {}): string[] {
  const d = tokenizer.createDetokenizer(options);
  return [...ids.map((id) => d.push(id)), d.flush()];
}

describe('the llama2-vocabulary tokenizer', () => {
  it('knows its specials and size', () => {
    expect([
      tokenizer.vocabSize,
      tokenizer.bosTokenId,
      tokenizer.eosTokenIds,
      tokenizer.bosToken,
      tokenizer.eosToken,
    ]).toEqual([32000, 1, [2], '<s>', '</s>']);
    expect(tokenizer.tokenPiece(22557)).toBe('\u2581Hello');
    expect(tokenizer.tokenPiece(32000)).toBeNull();
  });

  it('encodes to known ids, with BOS only when asked', () => {
    expect(tokenizer.encode('Hello world')).toEqual([1, 22557, 1526]);
    expect(tokenizer.encode('Hello world', { addSpecialTokens: false })).toEqual([22557, 1526]);
    expect(tokenizer.encode('', { addSpecialTokens: false })).toEqual([]);
  });

  it.each(TEXTS)('round-trips %j', (text) => {
    const ids = tokenizer.encode(text, { addSpecialTokens: false });
    expect(tokenizer.decode(ids)).toBe(text);
    expect(tokenizer.decode([1, ...ids], { skipSpecialTokens: true })).toBe(text);
  });

  it('shows or skips special tokens on decode, and ignores ids outside the vocabulary', () => {
    expect(tokenizer.decode([1, 22557, 2])).toBe('<s> Hello</s>');
    expect(tokenizer.decode([1, 22557, 2], { skipSpecialTokens: true })).toBe('Hello');
    expect(tokenizer.decode([22557, 99999, -1])).toBe('Hello');
  });
});

describe('the incremental detokenizer', () => {
  it('holds back the bytes of a character until it is complete', () => {
    const ids = tokenizer.encode('a 🤖b', { addSpecialTokens: false }); // 🤖 is four byte-fallback tokens
    expect(ids).toEqual([264, 28705, 243, 162, 167, 153, 28726]);
    expect(stream(ids)).toEqual(['a', ' ', '', '', '', '🤖', 'b', '']);
  });

  it('streams exactly what a whole decode gives, for every test text', () => {
    for (const text of TEXTS) {
      const ids = tokenizer.encode(text, { addSpecialTokens: false });
      expect(stream(ids).join('')).toBe(tokenizer.decode(ids));
    }
  });

  it('streams exactly what a whole decode gives, for random id sequences', () => {
    const rng = new Rng(11);
    for (let trial = 0; trial < 200; trial++) {
      // Mostly byte tokens (3..258) so that incomplete and invalid UTF-8 is common.
      const ids = Array.from({ length: 1 + rng.int(12) }, () => (rng.chance(0.6) ? 3 + rng.int(256) : rng.int(32000)));
      expect(stream(ids, { skipSpecialTokens: true }).join('')).toBe(
        tokenizer.decode(ids, { skipSpecialTokens: true }),
      );
    }
  });

  it('gives the first streamed token its leading space when the prompt is context', () => {
    const prompt = tokenizer.encode('Once upon a');
    const [time] = tokenizer.encode(' time', { addSpecialTokens: false }).slice(-1);
    expect(stream([time!]).join('')).toBe('time');
    expect(stream([time!], { contextIds: prompt }).join('')).toBe(' time');
  });

  it('flushes an incomplete character at the end of a stream as U+FFFD', () => {
    const d = tokenizer.createDetokenizer();
    expect(d.push(3 + 0xf0)).toBe('');
    expect(d.push(3 + 0x9f)).toBe('');
    expect(d.flush()).toBe('\uFFFD');
  });
});

describe('createTokenizer', () => {
  it('turns a malformed tokenizer.json into a ModelLoadError naming the file', () => {
    expect(() =>
      createTokenizer({ tokenizerJson: { model: { type: 'Nope' } }, tokenizerConfig: {}, file: '/m/tokenizer.json' }),
    ).toThrow(ModelLoadError);
    expect(() =>
      createTokenizer({ tokenizerJson: { model: { type: 'Nope' } }, tokenizerConfig: {}, file: '/m/tokenizer.json' }),
    ).toThrow(/^\/m\/tokenizer.json: cannot build the tokenizer: /);
  });
});
