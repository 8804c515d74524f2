// Does tenant B's text carry tenant A's canaries? Pure matching and the threshold.
// Two kinds of evidence, each compared with the same count against a decoy set (drawn like the
// canaries, never sent), which measures the chance rate on the very outputs under test:
//   exact:   a 10-letter marker word of A's found verbatim in B's text. Chance: a given marker is
//            one of 14^5 x 5^5 (~1.7e9) strings, so the threshold is one hit, provided no decoy
//            marker hits (a decoy hit means the markers are not unique here: inconclusive).
//   n-grams: word trigrams of A's texts found in B's text. Under "no leak", a trigram hit is as
//            likely to be a canary's as a decoy's, so given T = hitsA + hitsDecoy hits, hitsA is
//            Binomial(T, 1/2); a finding needs hitsA >= 3 and P(X >= hitsA) < 0.001.
import { binomialTail } from './stats.js';
import type { CanarySet } from './prompts.js';

export const NGRAM = 3;
export const NGRAM_MIN_HITS = 3;
export const NGRAM_MAX_P = 0.001;

export interface CanaryMatch {
  readonly exactHits: readonly string[];
  readonly decoyExactHits: readonly string[];
  readonly ngramHits: number;
  readonly decoyNgramHits: number;
  /** P(X >= ngramHits), X ~ Binomial(ngramHits + decoyNgramHits, 1/2). */
  readonly ngramP: number;
  readonly verdict: 'clean' | 'finding' | 'inconclusive';
}

function words(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^a-z]+/)
    .filter((w) => w !== '');
}

function ngrams(text: string): Set<string> {
  const w = words(text);
  const out = new Set<string>();
  for (let i = 0; i + NGRAM <= w.length; i++) out.add(w.slice(i, i + NGRAM).join(' '));
  return out;
}

function count(outputs: readonly string[], set: CanarySet): { exact: string[]; ngram: number } {
  const lower = outputs.map((o) => o.toLowerCase());
  const exact = set.markers.filter((m) => lower.some((o) => o.includes(m)));
  const grams = new Set(set.texts.flatMap((t) => [...ngrams(t)]));
  let ngram = 0;
  for (const o of outputs) for (const g of ngrams(o)) if (grams.has(g)) ngram++;
  return { exact, ngram };
}

export function matchCanaries(outputs: readonly string[], canaries: CanarySet, decoys: CanarySet): CanaryMatch {
  const a = count(outputs, canaries);
  const d = count(outputs, decoys);
  const ngramP = binomialTail(a.ngram + d.ngram, a.ngram, 0.5);
  const ngramFinding = a.ngram >= NGRAM_MIN_HITS && ngramP < NGRAM_MAX_P;
  const verdict = d.exact.length > 0 ? 'inconclusive' : a.exact.length > 0 || ngramFinding ? 'finding' : 'clean';
  return { exactHits: a.exact, decoyExactHits: d.exact, ngramHits: a.ngram, decoyNgramHits: d.ngram, ngramP, verdict };
}
