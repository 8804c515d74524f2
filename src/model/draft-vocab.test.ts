// A draft model must share the target's vocabulary id for id: the check names the first difference.
import { describe, expect, it } from 'vitest';
import { loadModelInfo } from './load.js';
import { vocabularyMismatch } from './draft-vocab.js';
import type { Tokenizer } from '../tokenizer/index.js';

const austen = await loadModelInfo('builtin:austen');

/** The austen tokenizer with one change. */
function altered(change: Partial<Tokenizer>): Pick<typeof austen, 'config' | 'tokenizer'> {
  const t = austen.tokenizer;
  const tokenizer = {
    vocabSize: t.vocabSize,
    bosTokenId: t.bosTokenId,
    eosTokenIds: t.eosTokenIds,
    tokenPiece: (id: number) => t.tokenPiece(id),
    ...change,
  } as Tokenizer;
  return { config: austen.config, tokenizer };
}

describe('vocabularyMismatch', () => {
  it('accepts the same vocabulary', () => {
    expect(vocabularyMismatch(austen, austen)).toBeUndefined();
    expect(vocabularyMismatch(austen, altered({}))).toBeUndefined();
  });

  it('names the first difference: embedding rows, size, BOS, EOS, a piece', () => {
    const rows = { config: { ...austen.config, vocabSize: 32000 }, tokenizer: austen.tokenizer };
    expect(vocabularyMismatch(austen, rows)).toMatch(/embedding has 4096 rows, the draft's 32000/);
    expect(vocabularyMismatch(austen, altered({ vocabSize: 4000 }))).toMatch(
      /tokenizer has 4096 tokens, the draft's 4000/,
    );
    expect(vocabularyMismatch(austen, altered({ bosTokenId: 1 }))).toMatch(/BOS is 4094 in the target, 1 in the draft/);
    expect(vocabularyMismatch(austen, altered({ eosTokenIds: [2] }))).toMatch(/EOS is \[4095\] in the target, \[2\]/);
    const piece = altered({ tokenPiece: (id) => (id === 300 ? 'other' : austen.tokenizer.tokenPiece(id)) });
    expect(vocabularyMismatch(austen, piece)).toMatch(/token 300 is .* in the target, "other" in the draft/);
  });
});
