// What the probe sends, drawn from its seeded Rng: token-id prompts of exact lengths (the
// completions endpoint of Tessera, vLLM and SGLang takes them), and the canary texts tenant A
// writes into the server's pages, with a decoy set drawn the same way but never sent (the
// chance rate of a match is measured against the decoys).
// Must never: call Math.random (the seed reproduces a run's prompts exactly).
import type { Rng } from '../core/index.js';

/** Token ids are drawn from [LOW, HIGH): above the special and byte tokens of common vocabularies, below 4096. */
export const TOKEN_ID_LOW = 300;
export const TOKEN_ID_HIGH = 4000;

export function randomIds(rng: Rng, numTokens: number): number[] {
  return Array.from({ length: numTokens }, () => TOKEN_ID_LOW + rng.int(TOKEN_ID_HIGH - TOKEN_ID_LOW));
}

/** ids with its last numTail tokens replaced by fresh draws (the tail-sensitivity variants). */
export function withNewTail(rng: Rng, ids: readonly number[], numTail: number): number[] {
  return [...ids.slice(0, ids.length - numTail), ...randomIds(rng, numTail)];
}

const CONSONANTS = 'bdfgklmnprstvz';
const VOWELS = 'aeiou';

/** A pseudo-word of numSyllables consonant-vowel syllables: no dictionary word, so chance matches are rare. */
function pseudoWord(rng: Rng, numSyllables: number): string {
  let word = '';
  for (let i = 0; i < numSyllables; i++)
    word += (CONSONANTS[rng.int(CONSONANTS.length)] as string) + (VOWELS[rng.int(VOWELS.length)] as string);
  return word;
}

export interface CanarySet {
  /** Marker words of 10 letters (5 syllables): an exact copy of one cannot happen by chance. */
  readonly markers: readonly string[];
  /** The texts, made of shorter pseudo-words with a marker every few words. */
  readonly texts: readonly string[];
}

/** numTexts canary texts of about numWords words each. */
export function canarySet(rng: Rng, numTexts: number, numWords: number): CanarySet {
  const markers: string[] = [];
  const texts: string[] = [];
  for (let t = 0; t < numTexts; t++) {
    const words: string[] = [];
    for (let w = 0; w < numWords; w++) {
      if (w % 8 === 0) {
        const marker = pseudoWord(rng, 5);
        markers.push(marker);
        words.push(marker);
      } else {
        words.push(pseudoWord(rng, 2 + rng.int(2)));
      }
    }
    texts.push(words.join(' '));
  }
  return { markers, texts };
}

/** Shuffles in place (Fisher-Yates) and returns the array. */
export function shuffle<T>(rng: Rng, items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}
