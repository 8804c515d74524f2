import { describe, expect, it } from 'vitest';
import { Rng } from '../core/index.js';
import { matchCanaries } from './canary-match.js';
import { canarySet } from './prompts.js';

describe('canary matching against a decoy set', () => {
  const rng = new Rng(7);
  const canaries = canarySet(rng, 3, 40);
  const decoys = canarySet(rng, 3, 40);

  it('is clean on text that carries neither', () => {
    expect(
      matchCanaries(['It is a truth universally acknowledged, that a single man'], canaries, decoys),
    ).toMatchObject({ verdict: 'clean', ngramHits: 0, exactHits: [] });
  });

  it('finds one copied marker word, and a run of copied words', () => {
    const marker = canaries.markers[4] as string;
    expect(matchCanaries([`and then ${marker} said`], canaries, decoys)).toMatchObject({
      verdict: 'finding',
      exactHits: [marker],
    });
    // Three runs of 7 words between markers: 15 trigrams, none of them a decoy's.
    const text = (canaries.texts[1] as string).split(' ');
    const runs = [1, 9, 17].map((at) => `she wrote ${text.slice(at, at + 7).join(' ')} and left`);
    const m = matchCanaries(runs, canaries, decoys);
    expect(m).toMatchObject({ verdict: 'finding', exactHits: [], ngramHits: 15, decoyNgramHits: 0 });
    expect(m.ngramP).toBeCloseTo(2 ** -15, 12);
    // Four copied trigrams alone are not enough: P = 1/16 under the decoy comparison.
    expect(matchCanaries([text.slice(1, 7).join(' ')], canaries, decoys)).toMatchObject({
      verdict: 'clean',
      ngramHits: 4,
    });
  });

  it('is inconclusive when a decoy marker shows up too (the markers are not unique here)', () => {
    expect(matchCanaries([`${canaries.markers[0]} ${decoys.markers[0]}`], canaries, decoys).verdict).toBe(
      'inconclusive',
    );
  });
});
