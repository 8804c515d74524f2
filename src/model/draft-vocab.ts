// Whether a draft model may draft for a target model (--draft-model): the same vocabulary, id for
// id. A draft token is an id the target verifies; an id that means another piece in the target
// would be verified as that piece (never wrong output: the verifier keeps the target's tokens, but
// every draft wasted), and an id past the target's embedding could not be fed at all. So the check
// is exact, as llama.cpp's speculative example checks its draft: the embedding rows, the
// tokenizer's size, BOS and EOS, and every id's piece.
// Owns: the comparison and the message naming the first difference. Pure; never loads a file.
import type { ModelInfo } from './load.js';

/** Why `draft` cannot draft for `target` (names the first difference), or undefined when it can. */
export function vocabularyMismatch(
  target: Pick<ModelInfo, 'config' | 'tokenizer'>,
  draft: Pick<ModelInfo, 'config' | 'tokenizer'>,
): string | undefined {
  if (target.config.vocabSize !== draft.config.vocabSize)
    return `the target's embedding has ${target.config.vocabSize} rows, the draft's ${draft.config.vocabSize}`;
  const t = target.tokenizer;
  const d = draft.tokenizer;
  if (t.vocabSize !== d.vocabSize)
    return `the target's tokenizer has ${t.vocabSize} tokens, the draft's ${d.vocabSize}`;
  if (t.bosTokenId !== d.bosTokenId) return `BOS is ${t.bosTokenId} in the target, ${d.bosTokenId} in the draft`;
  if (t.eosTokenIds.join(',') !== d.eosTokenIds.join(','))
    return `EOS is [${t.eosTokenIds.join(', ')}] in the target, [${d.eosTokenIds.join(', ')}] in the draft`;
  for (let id = 0; id < t.vocabSize; id++) {
    const a = t.tokenPiece(id);
    const b = d.tokenPiece(id);
    if (a !== b) return `token ${id} is ${JSON.stringify(a)} in the target, ${JSON.stringify(b)} in the draft`;
  }
  return undefined;
}
