// The tokenizer's vocabulary as xgrammar needs it: every id's raw piece and how pieces encode
// bytes. Owns the detection of the vocabulary's encoding from the pieces themselves (the
// Tokenizer interface does not say): GPT-2 byte-level pieces use 'Ġ' (space) and 'Ċ' (newline),
// SentencePiece pieces use '▁' for a space and '<0x0A>' byte-fallback tokens.
// Must never guess silently: a vocabulary with neither marker is 'raw' (pieces are their text).

/** What the engine needs of a tokenizer (src/tokenizer's Tokenizer, structurally). */
export interface VocabSource {
  readonly vocabSize: number;
  readonly eosTokenIds: readonly number[];
  tokenPiece(id: number): string | null;
}

export type VocabType = 'byte_level' | 'byte_fallback' | 'raw';

export interface GrammarVocab {
  /** Piece of each id below the tokenizer's vocabulary size ('' where an id has none). */
  readonly pieces: readonly string[];
  readonly vocabType: VocabType;
  /** SentencePiece: the first token's '▁' is the space the tokenizer prepended, not output. */
  readonly prependSpace: boolean;
  /** The number of logits (the model's vocabulary, at least the tokenizer's): the mask's width. */
  readonly numLogits: number;
  readonly stopTokenIds: readonly number[];
}

export function grammarVocab(tokenizer: VocabSource, numLogits: number): GrammarVocab {
  const pieces: string[] = [];
  let byteLevel = 0;
  let byteFallback = 0;
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    const piece = tokenizer.tokenPiece(id) ?? '';
    pieces.push(piece);
    if (/^<0x[0-9A-F]{2}>$/.test(piece)) byteFallback++;
    else if (piece.includes('Ġ') || piece.includes('Ċ')) byteLevel++;
  }
  const vocabType: VocabType = byteFallback >= 128 ? 'byte_fallback' : byteLevel > 0 ? 'byte_level' : 'raw';
  return {
    pieces,
    vocabType,
    prependSpace: vocabType === 'byte_fallback' && pieces.some((p) => p.startsWith('▁')),
    numLogits: Math.max(numLogits, tokenizer.vocabSize),
    stopTokenIds: [...tokenizer.eosTokenIds],
  };
}
