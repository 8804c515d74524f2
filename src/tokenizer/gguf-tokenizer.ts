// A GGUF's embedded tokenizer (tokenizer.ggml.*) -> the tokenizer.json + tokenizer_config.json
// pair that tokenizer.ts builds from, as transformers' GGUF converter does:
//   'llama' -> SentencePiece-style BPE with byte fallback; merges rebuilt from vocab + scores
//   'gpt2'  -> byte-level BPE with the file's merges and the pre-tokenizer named by
//              tokenizer.ggml.pre (llama-bpe, qwen2, gpt-4o, smollm, gpt2)
// It must never guess: an unknown tokenizer model or pre-tokenizer is a ModelLoadError.
import { ModelLoadError } from '../core/index.js';
import { TOKEN_TYPE, GgufMeta } from '../formats/index.js';
import type { GgufFile, JsonObject } from '../formats/index.js';

const SPIECE_UNDERLINE = '\u2581';

export interface GgufTokenizerJson {
  readonly tokenizerJson: JsonObject;
  readonly tokenizerConfig: JsonObject;
}

/** Regexes of llama.cpp's byte-level pre-tokenizers, as in the models' tokenizer.json files. */
const PRE_TOKENIZER_REGEX: Readonly<Record<string, string>> = {
  'llama-bpe':
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen2:
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  // o200k (gpt-oss, GPT-4o): llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT4O, the regex of gpt-oss's tokenizer.json,
  // cut at its top-level alternatives: a word ending in lower case, a word in capitals (each with an
  // optional contraction), then digits by three, punctuation, line breaks and spaces.
  'gpt-4o':
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
    '\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
};

export function ggufTokenizerJson(g: GgufFile): GgufTokenizerJson {
  const meta = new GgufMeta(g);
  const model = meta.optStr('tokenizer.ggml.model');
  if (model === null) throw new ModelLoadError(g.file, 'no embedded tokenizer (tokenizer.ggml.model is missing)');
  const tokens = meta.optStrings('tokenizer.ggml.tokens');
  if (tokens === null || tokens.length === 0)
    throw new ModelLoadError(g.file, 'tokenizer.ggml.tokens is missing or empty');
  const types = meta.optNumbers('tokenizer.ggml.token_type');
  if (types !== null && types.length !== tokens.length) {
    throw new ModelLoadError(
      g.file,
      `tokenizer.ggml.token_type has ${types.length} entries for ${tokens.length} tokens`,
    );
  }
  const vocab: Record<string, number> = Object.create(null) as Record<string, number>;
  tokens.forEach((t, id) => {
    if (vocab[t] === undefined) vocab[t] = id;
  });
  const idText = (key: string): string | null => {
    const id = meta.optInt(key);
    if (id === null) return null;
    if (id < 0 || id >= tokens.length)
      throw new ModelLoadError(g.file, `${key} = ${id} is outside the vocabulary of ${tokens.length}`);
    return tokens[id]!;
  };
  const bos = idText('tokenizer.ggml.bos_token_id');
  const eos = idText('tokenizer.ggml.eos_token_id');
  const unk = idText('tokenizer.ggml.unknown_token_id');
  const addedTokens = tokens.flatMap((content, id) => {
    const type = types?.[id] ?? TOKEN_TYPE.normal;
    const special = type === TOKEN_TYPE.control || type === TOKEN_TYPE.unknown;
    if (!special && type !== TOKEN_TYPE.userDefined) return [];
    return [{ id, content, special, single_word: false, lstrip: false, rstrip: false, normalized: false }];
  });

  switch (model) {
    case 'llama': {
      const scores = meta.optNumbers('tokenizer.ggml.scores');
      if (scores !== null && scores.length !== tokens.length) {
        throw new ModelLoadError(
          g.file,
          `tokenizer.ggml.scores has ${scores.length} entries for ${tokens.length} tokens`,
        );
      }
      const addBos = meta.optBool('tokenizer.ggml.add_bos_token') ?? true;
      const addEos = meta.optBool('tokenizer.ggml.add_eos_token') ?? false;
      const addSpacePrefix = meta.optBool('tokenizer.ggml.add_space_prefix') ?? true;
      const tokenizerJson = {
        version: '1.0',
        added_tokens: addedTokens,
        normalizer: {
          type: 'Sequence',
          normalizers: [
            ...(addSpacePrefix ? [{ type: 'Prepend', prepend: SPIECE_UNDERLINE }] : []),
            { type: 'Replace', pattern: { String: ' ' }, content: SPIECE_UNDERLINE },
          ],
        },
        pre_tokenizer: null,
        post_processor: templateProcessing(addBos ? bos : null, addEos ? eos : null, tokens),
        decoder: {
          type: 'Sequence',
          decoders: [
            { type: 'Replace', pattern: { String: SPIECE_UNDERLINE }, content: ' ' },
            { type: 'ByteFallback' },
            { type: 'Fuse' },
            ...(addSpacePrefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : []),
          ],
        },
        model: {
          type: 'BPE',
          unk_token: unk ?? tokens[0],
          fuse_unk: true,
          byte_fallback: true,
          vocab,
          merges: sentencePieceMerges(vocab, tokens, scores),
        },
      };
      const tokenizerConfig = {
        tokenizer_class: 'LlamaTokenizer',
        legacy: true,
        bos_token: bos,
        eos_token: eos,
        unk_token: unk,
        add_bos_token: addBos,
        add_eos_token: addEos,
        clean_up_tokenization_spaces: false,
      };
      return { tokenizerJson, tokenizerConfig };
    }
    case 'gpt2': {
      const merges = meta.optStrings('tokenizer.ggml.merges');
      if (merges === null)
        throw new ModelLoadError(g.file, "tokenizer.ggml.merges is missing (needed by the 'gpt2' tokenizer)");
      const pre = meta.optStr('tokenizer.ggml.pre') ?? 'default';
      const addBos = meta.optBool('tokenizer.ggml.add_bos_token') ?? pre !== 'qwen2';
      const tokenizerJson = {
        version: '1.0',
        added_tokens: addedTokens,
        normalizer: null,
        pre_tokenizer: byteLevelPreTokenizer(pre, g.file),
        post_processor: templateProcessing(addBos ? bos : null, null, tokens),
        decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
        model: {
          type: 'BPE',
          unk_token: unk,
          fuse_unk: false,
          byte_fallback: false,
          ignore_merges: pre === 'llama-bpe',
          vocab,
          merges: merges.map((m) => splitMerge(m, g.file)),
        },
      };
      const tokenizerConfig = {
        tokenizer_class: 'GPT2Tokenizer',
        bos_token: bos,
        eos_token: eos,
        unk_token: unk,
        clean_up_tokenization_spaces: false,
      };
      return { tokenizerJson, tokenizerConfig };
    }
    default:
      throw new ModelLoadError(
        g.file,
        `tokenizer.ggml.model "${model}" is not supported (Tessera reads 'llama' and 'gpt2')`,
      );
  }
}

function splitMerge(merge: string, file: string): [string, string] {
  const at = merge.indexOf(' ', 1);
  if (at < 0) throw new ModelLoadError(file, `bad merge ${JSON.stringify(merge)} in tokenizer.ggml.merges`);
  return [merge.slice(0, at), merge.slice(at + 1)];
}

function byteLevelPreTokenizer(pre: string, file: string): JsonObject {
  const byteLevel = (useRegex: boolean): JsonObject => ({
    type: 'ByteLevel',
    add_prefix_space: false,
    trim_offsets: true,
    use_regex: useRegex,
  });
  const regex = PRE_TOKENIZER_REGEX[pre];
  if (regex !== undefined) {
    return {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false },
        byteLevel(false),
      ],
    };
  }
  switch (pre) {
    case 'default':
    case 'gpt2':
      return byteLevel(true);
    case 'smollm':
      return { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true)] };
    default:
      throw new ModelLoadError(
        file,
        `tokenizer.ggml.pre "${pre}" is not supported (llama-bpe, qwen2, gpt-4o, smollm, gpt2, default)`,
      );
  }
}

function templateProcessing(bos: string | null, eos: string | null, tokens: readonly string[]): JsonObject {
  const ends = [bos, eos].filter((t): t is string => t !== null);
  const special = (id: string): JsonObject => ({ SpecialToken: { id, type_id: 0 } });
  const single = [
    ...(bos !== null ? [special(bos)] : []),
    { Sequence: { id: 'A', type_id: 0 } },
    ...(eos !== null ? [special(eos)] : []),
  ];
  return {
    type: 'TemplateProcessing',
    single,
    pair: [...single, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: Object.fromEntries(ends.map((t) => [t, { id: t, ids: [tokens.indexOf(t)], tokens: [t] }])),
  };
}

/**
 * SentencePiece BPE merges from vocabulary and scores (transformers' generate_merges): every
 * split of every piece into two pieces of the vocabulary is a merge, ranked by the score of
 * the merged piece (higher first), ties by the ids of the two halves. With no scores, by id.
 */
export function sentencePieceMerges(
  vocab: Readonly<Record<string, number>>,
  tokens: readonly string[],
  scores: readonly number[] | null,
): [string, string][] {
  const ids = new Map<string, number>();
  tokens.forEach((piece, id) => {
    if (!ids.has(piece)) ids.set(piece, id);
  });
  const lefts: string[] = [];
  const rights: string[] = [];
  const keys: number[] = [];
  const local: [string, string, number, number][] = [];
  tokens.forEach((piece, id) => {
    if (ids.get(piece) !== id || vocab[piece] !== id) return; // a duplicate piece: the first id owns it
    local.length = 0;
    // Split between code points (never inside a surrogate pair).
    for (let k = 1; k < piece.length; k++) {
      const unit = piece.charCodeAt(k);
      if (unit >= 0xdc00 && unit <= 0xdfff) continue;
      const l = ids.get(piece.slice(0, k));
      const r = l === undefined ? undefined : ids.get(piece.slice(k));
      if (l !== undefined && r !== undefined) local.push([piece.slice(0, k), piece.slice(k), l, r]);
    }
    local.sort((a, b) => a[2] - b[2] || a[3] - b[3]);
    const score = scores === null ? -id : scores[id]!;
    for (const [l, r] of local) {
      lefts.push(l);
      rights.push(r);
      keys.push(score);
    }
  });
  const order = Array.from(keys, (_, i) => i);
  order.sort((a, b) => keys[b]! - keys[a]! || a - b);
  return order.map((i) => [lefts[i]!, rights[i]!]);
}
