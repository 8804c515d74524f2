// A draft model's restricted head (FR-Spec, draft-head.ts) on real (tiny, random) models with the
// reference kernels:
//   - the restricted head's logit row i is exactly the full head's logit of token tokens[i]
//   - a draft model with a restricted head (a permutation of the whole vocabulary: every index
//     maps to another id) drafts what the unrestricted one drafts, and outputs are unchanged
//   - a head that leaves out every token the target says: nothing is accepted, outputs unchanged
//   - rankTokens: by count, ties and the unseen by id
import { describe, expect, it } from 'vitest';
import { asRequestId, DEFAULT_TENANT, NO_FAULTS, samplingParams, type SamplingParams } from '../core/index.js';
import { createRefDense, createRefOps } from '../kernels/index.js';
import { ModelRunner } from './runner.js';
import { PRESET_CONFIGS, randomModel } from '../gen/index.js';
import { prepareWeights } from './weights-prepared.js';
import { type ModelConfig } from '../formats/index.js';
import { PagePool } from '../pages/index.js';
import { DEFAULT_SPEC, type SpecOptions } from '../scheduler/index.js';
import { DraftModel } from './draft-model.js';
import { rankTokens, restrictHead } from './draft-head.js';
import { runSpecLoop } from '../worker/testing/spec-loop.js';

const TARGET: ModelConfig = {
  ...PRESET_CONFIGS.tiny,
  vocabSize: 64,
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 3,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
};
const DRAFT: ModelConfig = { ...TARGET, numLayers: 1 };
const SPEC: SpecOptions = { ...DEFAULT_SPEC, maxDraft: 4, maxBatch: 8, drafter: 'model', minAcceptance: 0.05 };
const dense = createRefDense();
const ops = createRefOps();

function runnerOf(config: ModelConfig, weights: Awaited<ReturnType<typeof prepareWeights>>): ModelRunner {
  const shape = { numPages: 96, pageSize: 4, numLayers: config.numLayers, numKvHeads: 2, headDim: 8 };
  const pool = PagePool.create(shape, NO_FAULTS);
  return new ModelRunner({ config, weights, dense, ops, pool, maxStepTokens: 64, maxStepLogits: 48 });
}

const draftModel = () => ({ config: DRAFT, tensors: randomModel(DRAFT, 11).tensors });
const PROMPTS = [[3, 4, 5, 6, 7, 8, 9, 10, 3, 4, 5], [20, 21, 22, 23, 20, 21], [40, 41, 40], [5]];
const greedy = (): SamplingParams => samplingParams({ maxTokens: 20, temperature: 0, ignoreEos: true });

async function generate(headTokens?: readonly number[], speculate = true) {
  const target = await prepareWeights(TARGET, randomModel(TARGET, 11).tensors, dense, ops);
  const restricted = headTokens === undefined ? undefined : restrictHead(draftModel(), headTokens);
  const draft = restricted?.model ?? draftModel();
  const drafter = new DraftModel({
    runner: runnerOf(DRAFT, await prepareWeights(draft.config, draft.tensors, dense, ops)),
    maxBatch: SPEC.maxBatch,
    faults: NO_FAULTS,
    costRatio: 0.01,
    ...(restricted === undefined ? {} : { headTokens: restricted.tokens }),
  });
  // Every verify step's first draft, by request and position: deterministic (a greedy draft of the same text).
  const firstDrafts = new Map<string, number>();
  const runner = runnerOf(TARGET, target);
  const step = runner.step.bind(runner);
  runner.step = (items) => {
    for (const it of items) if (it.verifiesDrafts === true) firstDrafts.set(`${it.rid}@${it.startPos}`, it.tokens[1]!);
    return step(items);
  };
  const run = await runSpecLoop({
    runner,
    prompts: PROMPTS,
    params: greedy,
    faults: NO_FAULTS,
    ...(speculate ? { speculation: SPEC, drafter } : {}),
  });
  return { ...run, firstDrafts };
}

describe("a draft model's restricted head (FR-Spec)", () => {
  it("gives exactly the full head's logits of the chosen tokens, in their order", async () => {
    const tokens = [63, 0, 17, 5, 40, 41, 2, 33];
    const full = runnerOf(DRAFT, await prepareWeights(DRAFT, draftModel().tensors, dense, ops));
    const r = restrictHead(draftModel(), tokens);
    const cut = runnerOf(DRAFT, await prepareWeights(r.model.config, r.model.tensors, dense, ops));
    const item = (runner: ModelRunner) => {
      const got = runner.pool.ledger.allocate(2, { rid: asRequestId('x'), tenant: DEFAULT_TENANT });
      if (got.kind !== 'allocated') throw new Error('no pages');
      return {
        rid: asRequestId('x'),
        tenant: DEFAULT_TENANT,
        tags: got.tags,
        tokens: [9, 8, 7],
        startPos: 0,
        wantLogits: true,
      };
    };
    const [a] = await full.step([item(full)]);
    const [b] = await cut.step([item(cut)]);
    if (a?.kind !== 'logits' || b?.kind !== 'logits') throw new Error('no logits');
    expect(b.logits).toHaveLength(tokens.length);
    expect([...b.logits]).toEqual(tokens.map((t) => a.logits[t]));
  });

  it('drafts through the map: a permuted whole vocabulary drafts what the unrestricted head drafts', async () => {
    const plain = await generate(undefined, false);
    const whole = await generate();
    const permuted = await generate(Array.from({ length: 64 }, (_, i) => (i * 37 + 11) % 64));
    expect(whole.numAccepted).toBeGreaterThan(0);
    // (The draft lengths follow measured step times, so which steps draft may differ; where both
    // drafted at the same position, the first draft is the same token.)
    const both = [...permuted.firstDrafts.keys()].filter((key) => whole.firstDrafts.has(key));
    expect(both.length).toBeGreaterThan(4);
    for (const key of both) expect(permuted.firstDrafts.get(key), key).toBe(whole.firstDrafts.get(key));
    for (const [rid, tokens] of plain.outputs) {
      expect(whole.outputs.get(rid)).toEqual(tokens);
      expect(permuted.outputs.get(rid)).toEqual(tokens);
    }
  });

  it('a head without the tokens the target says: nothing accepted, outputs unchanged (the target verifies)', async () => {
    const plain = await generate(undefined, false);
    const said = new Set([...plain.outputs.values()].flat());
    const others = Array.from({ length: 64 }, (_, i) => i).filter((t) => !said.has(t));
    expect(others.length).toBeGreaterThan(0);
    const cut = await generate(others);
    expect(cut.fatal).toBeUndefined();
    expect(cut.numAccepted).toBe(0);
    for (const [rid, tokens] of plain.outputs) expect(cut.outputs.get(rid)).toEqual(tokens);
  });

  it('rankTokens: the most counted first, ties and the unseen by id', () => {
    const counts = new Map([
      [7, 3],
      [2, 5],
      [9, 3],
      [4, 0],
    ]);
    expect(rankTokens(counts, 12, 6)).toEqual([2, 7, 9, 0, 1, 3]);
    expect(() => restrictHead(draftModel(), [1, 1])).toThrow(/repeated/);
  });
});
