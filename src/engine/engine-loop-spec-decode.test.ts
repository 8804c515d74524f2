// Speculative decoding end to end on a real (tiny, random) model with the reference kernels: the
// scheduler's prompt-lookup drafts, the runner's k + 1 logits rows, verification and the stamps'
// rollback, with the scheduler's integrity checked around every step.
//   - greedy: every request of a batch decodes exactly the tokens it decodes without speculation
//   - temperature > 0: every seeded request samples what it samples without speculation (the
//     verdict draws each position with its own seeded draw: spec-verify.ts); the distribution
//     itself is spec-verify.test.ts's chi-square
//   - fault keep-rejected-stamps: the integrity check after the step finds the rejected positions
//     still stamped, and the loop stops
import { describe, expect, it } from 'vitest';
import {
  asRequestId,
  FaultSet,
  NO_FAULTS,
  samplingParams,
  type FaultSet as Faults,
  type SamplingParams,
} from '../core/index.js';
import { createRefDense, createRefOps } from '../kernels/index.js';
import { ModelRunner } from './runner.js';
import { PRESET_CONFIGS, randomModel } from '../gen/index.js';
import { prepareWeights } from './weights-prepared.js';
import { type ModelConfig } from '../formats/index.js';
import { PagePool } from '../pages/index.js';
import { DEFAULT_SPEC, type SpecOptions } from '../scheduler/index.js';
import { runSpecLoop, type SpecRun } from '../worker/testing/spec-loop.js';

const CONFIG: ModelConfig = {
  ...PRESET_CONFIGS.tiny,
  vocabSize: 64,
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
};
const PAGE_SIZE = 4;
const SPEC: SpecOptions = { ...DEFAULT_SPEC, maxDraft: 4, maxBatch: 8, minNgram: 1 };

const weightsOnce = (async () => {
  const { tensors } = randomModel(CONFIG, 11);
  const dense = createRefDense();
  const ops = createRefOps();
  return { weights: await prepareWeights(CONFIG, tensors, dense, ops), dense, ops };
})();

/** Runs the requests to their ends in one engine loop (all admitted at once: they share steps). */
async function generate(
  prompts: readonly (readonly number[])[],
  params: (i: number) => SamplingParams,
  speculation: SpecOptions | undefined,
  faults: Faults = NO_FAULTS,
): Promise<SpecRun> {
  const { weights, dense, ops } = await weightsOnce;
  const shape = { numPages: 96, pageSize: PAGE_SIZE, numLayers: 2, numKvHeads: 2, headDim: 8 };
  const pool = PagePool.create(shape, faults);
  const runner = new ModelRunner({ config: CONFIG, weights, dense, ops, pool, maxStepTokens: 64, maxStepLogits: 48 });
  return runSpecLoop({ runner, prompts, params, faults, ...(speculation === undefined ? {} : { speculation }) });
}

/** Prompts that repeat themselves (prompt lookup finds matches) and one that does not. */
const PROMPTS: readonly (readonly number[])[] = [
  [3, 4, 5, 6, 7, 8, 9, 10, 3, 4, 5, 6, 7, 8, 9, 10, 3, 4, 5],
  [20, 21, 22, 23, 20, 21, 22, 23, 20, 21],
  [40, 41, 40, 41, 40, 41, 40],
  [1, 9, 17, 25, 33, 41, 49, 57, 2, 10, 18, 26],
  [5, 5, 5, 5, 5, 5],
];

describe('speculative decoding (prompt lookup) on a real model', () => {
  it('greedy: every request of a batch decodes token for token what it decodes without speculation', async () => {
    const greedy = (): SamplingParams => samplingParams({ maxTokens: 24, temperature: 0, ignoreEos: true });
    const plain = await generate(PROMPTS, greedy, undefined);
    const spec = await generate(PROMPTS, greedy, SPEC);
    expect(plain.fatal).toBeUndefined();
    expect(spec.fatal).toBeUndefined();
    expect(plain.numDrafted).toBe(0);
    expect(spec.numDrafted).toBeGreaterThan(0);
    expect(spec.numAccepted).toBeGreaterThan(0); // drafts did get accepted: several tokens per step
    expect(spec.numRolledBack).toBe(spec.numDrafted - spec.numAccepted);
    for (const [rid, tokens] of plain.outputs) {
      expect(tokens).toHaveLength(24);
      expect(spec.outputs.get(rid)).toEqual(tokens);
    }
  });

  it('penalties apply per position as without speculation (greedy with a frequency penalty)', async () => {
    const penalized = (): SamplingParams =>
      samplingParams({ maxTokens: 16, temperature: 0, ignoreEos: true, frequencyPenalty: 0.5, presencePenalty: 0.3 });
    const plain = await generate(PROMPTS, penalized, undefined);
    const spec = await generate(PROMPTS, penalized, SPEC);
    expect(spec.numDrafted).toBeGreaterThan(0);
    for (const [rid, tokens] of plain.outputs) expect(spec.outputs.get(rid)).toEqual(tokens);
  });

  it('temperature > 0: every seeded request samples token for token what it samples without speculation', async () => {
    // A prompt that holds the model's own likely continuation of its end (P, greedy(P), P): the
    // drafts after it are tokens the model gives real probability, so some are accepted, some not.
    const head = PROMPTS[3]!.slice(0, 6);
    const greedy = await generate(
      [head],
      () => samplingParams({ maxTokens: 8, temperature: 0, ignoreEos: true }),
      undefined,
    );
    const prompt = [...head, ...greedy.outputs.get(asRequestId('r0'))!, ...head];
    const sampled = (i: number): SamplingParams =>
      samplingParams({ maxTokens: 6, temperature: 0.7, topK: 6, ignoreEos: true, seed: 1000 + i });
    const prompts = Array.from({ length: 48 }, () => prompt);
    const plain = await generate(prompts, sampled, undefined);
    const spec = await generate(prompts, sampled, SPEC);
    expect(spec.numAccepted).toBeGreaterThan(0);
    expect(spec.numDrafted - spec.numAccepted).toBeGreaterThan(0); // both verdicts happened
    for (const [rid, tokens] of plain.outputs) expect(spec.outputs.get(rid)).toEqual(tokens);
  });

  it('fault keep-rejected-stamps: rejected positions stay stamped and the integrity check after the step stops the loop', async () => {
    const greedy = (): SamplingParams => samplingParams({ maxTokens: 24, temperature: 0, ignoreEos: true });
    const run = await generate(PROMPTS, greedy, SPEC, new FaultSet(['keep-rejected-stamps']));
    expect(String(run.fatal)).toMatch(/its stamp covers more.*rejected drafts not rolled back/);
  });
});
