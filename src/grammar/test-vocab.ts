// A tiny raw vocabulary for the grammar engine's tests: every printable ASCII character as its
// own token, a few words, and an end-of-text token. It must never be used outside tests.
import type { GrammarVocab } from './vocab.js';

export function testVocab(): GrammarVocab {
  const pieces: string[] = [];
  for (let code = 32; code < 127; code++) pieces.push(String.fromCharCode(code));
  pieces.push('true', 'false', 'null', '{"', '":', '"}', '</s>');
  return { pieces, vocabType: 'raw', prependSpace: false, numLogits: pieces.length, stopTokenIds: [pieces.length - 1] };
}

/** The ids of `text`, one character at a time. */
export function charIds(vocab: GrammarVocab, text: string): number[] {
  return [...text].map((ch) => vocab.pieces.indexOf(ch));
}

/** Whether `id` is allowed by `mask`. */
export function allows(mask: Int32Array, id: number): boolean {
  return ((mask[id >> 5] as number) >>> (id & 31)) % 2 === 1;
}
