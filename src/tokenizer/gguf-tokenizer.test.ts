import { beforeAll, describe, expect, it } from 'vitest';
import type { GgufValue } from '../formats/index.js';
import { readGguf, encodeGguf, gguf, parseJsonObject, type JsonObject } from '../formats/index.js';
import { ggufTokenizerJson, sentencePieceMerges } from './gguf-tokenizer.js';
import { ggufVocabFromTokenizerJson, readLlama2Vocab } from '../gen/index.js';
import { createTokenizer, type Tokenizer } from './tokenizer.js';

const FILE = '/m/vocab.gguf';

function ggufTokenizer(metadata: [string, GgufValue][]): Tokenizer {
  const g = readGguf(encodeGguf(metadata, []), FILE);
  return createTokenizer({ ...ggufTokenizerJson(g), file: FILE });
}

describe("GGUF 'llama' tokenizer (SentencePiece BPE with byte fallback)", () => {
  let hfJson: JsonObject;
  let hf: Tokenizer;
  let fromGguf: Tokenizer;
  let metadata: [string, GgufValue][];
  beforeAll(async () => {
    const vocab = await readLlama2Vocab();
    hfJson = parseJsonObject(vocab.tokenizerJsonText, 'tokenizer.json');
    hf = createTokenizer({ tokenizerJson: hfJson, tokenizerConfig: vocab.tokenizerConfig, file: 'tokenizer.json' });
    const v = ggufVocabFromTokenizerJson(hfJson, 'tokenizer.json');
    metadata = [
      ['tokenizer.ggml.model', gguf.str('llama')],
      ['tokenizer.ggml.tokens', gguf.strings(v.tokens)],
      ['tokenizer.ggml.scores', gguf.f32s(v.scores)],
      ['tokenizer.ggml.token_type', gguf.i32s(v.tokenTypes)],
      ['tokenizer.ggml.bos_token_id', gguf.u32(v.bosTokenId)],
      ['tokenizer.ggml.eos_token_id', gguf.u32(v.eosTokenId)],
      ['tokenizer.ggml.unknown_token_id', gguf.u32(v.unknownTokenId)],
    ];
    fromGguf = ggufTokenizer(metadata);
  });

  it('rebuilds exactly the merges of tokenizer.json from vocabulary and scores', () => {
    const v = ggufVocabFromTokenizerJson(hfJson, 'tokenizer.json');
    const vocab = Object.fromEntries(v.tokens.map((t, i) => [t, i]));
    const rebuilt = sentencePieceMerges(vocab, v.tokens, v.scores).map(([l, r]) => `${l} ${r}`);
    const original = (hfJson['model'] as { merges: string[] }).merges;
    expect(rebuilt.length).toBe(58980);
    expect(rebuilt).toEqual(original);
  });

  it('encodes and decodes as the tokenizer.json it came from', () => {
    for (const text of [
      'Hello world',
      ' Hello  world\n\nfoo',
      'héllo 😀 日本語',
      '   x',
      'tab\tand\r\nCRLF',
      '<s>hi</s>',
      'emoji 🤖🧠 and 数学',
    ]) {
      expect(fromGguf.encode(text)).toEqual(hf.encode(text));
      expect(fromGguf.encode(text, { addSpecialTokens: false })).toEqual(hf.encode(text, { addSpecialTokens: false }));
      const ids = hf.encode(text);
      expect(fromGguf.decode(ids)).toBe(hf.decode(ids));
    }
    expect([fromGguf.bosTokenId, fromGguf.eosTokenIds, fromGguf.vocabSize]).toEqual([1, [2], 32000]);
  });

  it('follows add_bos_token and add_space_prefix', () => {
    const noBos = ggufTokenizer([...metadata, ['tokenizer.ggml.add_bos_token', gguf.bool(false)]]);
    expect(noBos.encode('Hello')).toEqual(hf.encode('Hello', { addSpecialTokens: false }));
    const noPrefix = ggufTokenizer([...metadata, ['tokenizer.ggml.add_space_prefix', gguf.bool(false)]]);
    expect(noPrefix.encode('Hello', { addSpecialTokens: false })).not.toEqual(
      hf.encode('Hello', { addSpecialTokens: false }),
    );
    expect(noPrefix.decode(noPrefix.encode(' Hello', { addSpecialTokens: false }))).toBe(' Hello');
  });
});

describe('sentencePieceMerges', () => {
  it('ranks merges by the score of the merged piece, then by the ids of the halves; by id without scores', () => {
    const tokens = ['a', 'b', 'c', 'ab', 'bc', 'abc'];
    const vocab = Object.fromEntries(tokens.map((t, i) => [t, i]));
    expect(sentencePieceMerges(vocab, tokens, [0, 0, 0, -5, -1, -3])).toEqual([
      ['b', 'c'],
      ['a', 'bc'],
      ['ab', 'c'],
      ['a', 'b'],
    ]);
    expect(sentencePieceMerges(vocab, tokens, null)).toEqual([
      ['a', 'b'],
      ['b', 'c'],
      ['a', 'bc'],
      ['ab', 'c'],
    ]);
  });
});

/** GPT-2's byte -> printable character table. */
function byteChars(): string[] {
  const printable = [...Array(256).keys()].filter((b) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174);
  let extra = 0;
  return [...Array(256).keys()].map((b) => String.fromCodePoint(printable.includes(b) ? b : 256 + extra++));
}

describe("GGUF 'gpt2' tokenizer (byte-level BPE)", () => {
  const bytes = byteChars();
  const tokens = [...bytes, 'Ġt', 'he', 'Ġthe', '<|end|>'];
  const types = [...tokens.map(() => 1).slice(0, -1), 3];
  const base: [string, GgufValue][] = [
    ['tokenizer.ggml.model', gguf.str('gpt2')],
    ['tokenizer.ggml.pre', gguf.str('qwen2')],
    ['tokenizer.ggml.tokens', gguf.strings(tokens)],
    ['tokenizer.ggml.token_type', gguf.i32s(types)],
    ['tokenizer.ggml.merges', gguf.strings(['Ġ t', 'h e', 'Ġt he'])],
    ['tokenizer.ggml.eos_token_id', gguf.u32(259)],
  ];

  it('merges byte-level pieces, keeps special tokens whole and round-trips any text', () => {
    const t = ggufTokenizer(base);
    const id = (piece: string): number => tokens.indexOf(piece);
    expect(t.encode(' the', { addSpecialTokens: false })).toEqual([id('Ġthe')]);
    expect(t.encode('the<|end|>')).toEqual([id('t'), id('he'), 259]);
    for (const text of ['the theme', 'héllo 😀\n\tx', '']) expect(t.decode(t.encode(text))).toBe(text);
    expect(t.eosTokenIds).toEqual([259]);
    expect(t.bosTokenId).toBeNull();
  });

  it('rejects what it cannot build, naming the file and the key', () => {
    expect(() =>
      ggufTokenizer(
        base.map(([k, v]): [string, GgufValue] => [k, k === 'tokenizer.ggml.pre' ? gguf.str('falcon') : v]),
      ),
    ).toThrow(`${FILE}: tokenizer.ggml.pre "falcon" is not supported`);
    expect(() => ggufTokenizer(base.filter(([k]) => k !== 'tokenizer.ggml.merges'))).toThrow(
      `${FILE}: tokenizer.ggml.merges is missing`,
    );
    expect(() =>
      ggufTokenizer([
        ['tokenizer.ggml.model', gguf.str('bert')],
        ['tokenizer.ggml.tokens', gguf.strings(['a'])],
      ]),
    ).toThrow(`${FILE}: tokenizer.ggml.model "bert" is not supported`);
    expect(() => ggufTokenizer([])).toThrow(`${FILE}: no embedded tokenizer`);
    expect(() => ggufTokenizer([...base, ['tokenizer.ggml.token_type', gguf.i32s([1])]])).toThrow(
      'token_type has 1 entries for 260 tokens',
    );
  });
});
