// The rollback of rejected drafts is a page operation the page checks rely on: after it, a read
// that reaches a rejected position (here: an item whose start position counts the rejected drafts
// as computed, the bug a miscounting scheduler would have) fails checkRead's coverage and reads
// nothing. Under `keep-rejected-stamps` the same read passes and attends to the rejected tokens'
// K/V: the logits differ from those of the request's real tokens.
import { describe, expect, it } from 'vitest';
import {
  asRequestId,
  asTenantId,
  FaultSet,
  NO_FAULTS,
  PageCheckError,
  type BatchItem,
  type FaultSet as Faults,
  type Tag,
} from '../core/index.js';
import { createRefDense, createRefOps } from '../kernels/index.js';
import { ModelRunner } from './runner.js';
import { PRESET_CONFIGS, randomModel } from '../gen/index.js';
import { prepareWeights } from './weights-prepared.js';
import { type ModelConfig } from '../formats/index.js';
import { PagePool } from '../pages/index.js';
import type { StepResult } from '../scheduler/index.js';
import { rollbackRejected } from './spec-verify.js';

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
const OWNER = { rid: asRequestId('r'), tenant: asTenantId('t') };
const PROMPT = [5, 9, 13, 17, 21, 25];
const FED = 30; // the last sampled token, fed with the drafts
const DRAFTS = [31, 32, 33]; // all rejected
const SAMPLED = 40; // what verification sampled instead of DRAFTS[0]

async function setup(faults: Faults): Promise<{ runner: ModelRunner; pool: PagePool; tags: readonly Tag[] }> {
  const { tensors } = randomModel(CONFIG, 3);
  const dense = createRefDense();
  const ops = createRefOps();
  const weights = await prepareWeights(CONFIG, tensors, dense, ops);
  const pool = PagePool.create({ numPages: 8, pageSize: 4, numLayers: 2, numKvHeads: 2, headDim: 8 }, faults);
  const runner = new ModelRunner({ config: CONFIG, weights, dense, ops, pool, maxStepTokens: 16, maxStepLogits: 8 });
  const result = pool.ledger.allocate(3, OWNER);
  if (result.kind !== 'allocated') throw new Error('pool too small');
  return { runner, pool, tags: result.tags };
}

const item = (tags: readonly Tag[], tokens: number[], startPos: number, extra: Partial<BatchItem> = {}): BatchItem => ({
  ...OWNER,
  tags,
  tokens,
  startPos,
  wantLogits: true,
  ...extra,
});

/** Prefill, one verification step whose drafts are all rejected, its rollback; then `next`'s result. */
async function afterRejection(faults: Faults, next: (tags: readonly Tag[]) => BatchItem) {
  const { runner, pool, tags } = await setup(faults);
  await runner.step([item(tags, PROMPT, 0)]);
  const spec = item(tags, [FED, ...DRAFTS], PROMPT.length, { logitCount: 4, verifiesDrafts: true });
  const outputs = await runner.step([spec]);
  const verdict: StepResult = {
    kind: 'sampled',
    rid: OWNER.rid,
    token: SAMPLED,
    drafts: { numDrafted: 3, accepted: [] },
  };
  expect(rollbackRejected(pool, [spec], outputs, [verdict], faults)).toBe(3);
  return { pool, tags, result: (await runner.step([next(tags)]))[0]! };
}

/** The logits of SAMPLED after the request's real tokens: prompt, FED (nothing of the drafts). */
async function truth(): Promise<Float32Array> {
  const { runner, tags } = await setup(NO_FAULTS);
  const out = (await runner.step([item(tags, [...PROMPT, FED, SAMPLED], 0)]))[0]!;
  if (out.kind !== 'logits') throw new Error('no logits');
  return Float32Array.from(out.logits);
}

describe('rollback of rejected drafts (pool.rollbackStamps after verification)', () => {
  // The miscounted read: SAMPLED fed after the rejected drafts, as if they had been accepted.
  const miscounted = (tags: readonly Tag[]): BatchItem => item(tags, [SAMPLED], PROMPT.length + 4);
  // The right read: SAMPLED right after FED.
  const counted = (tags: readonly Tag[]): BatchItem => item(tags, [SAMPLED], PROMPT.length + 1);

  it('leaves the stamps at the accepted end: page 1 covers the prompt and FED only, page 2 (only drafts) none', async () => {
    // Positions: prompt 0-5, FED 6 (page 1 slot 2), drafts 7-9 (page 1 slot 3, page 2 slots 0-1).
    const { pool, tags } = await afterRejection(NO_FAULTS, counted);
    expect(pool.stampOf(tags[1]!.page).filledSlots).toBe(4); // rolled back to 3, then SAMPLED wrote slot 3
    expect(pool.stampOf(tags[2]!.page)).toEqual({ epoch: tags[2]!.epoch, filledSlots: 0 });
    // The page only rejected drafts filled stays the request's own, never another's with stale bytes.
    expect(pool.ledger.entry(tags[2]!.page)).toMatchObject({ state: 'allocated', epoch: tags[2]!.epoch });
  });

  it('a read past the accepted end fails the page check (stamp coverage) and reads nothing', async () => {
    const { result } = await afterRejection(NO_FAULTS, miscounted);
    expect(result.kind).toBe('failed');
    if (result.kind === 'failed') {
      expect(result.error).toBeInstanceOf(PageCheckError);
      expect(result.error.failure).toBe('stamp-coverage');
    }
  });

  it('the right read after the rollback equals the request without any drafts, exactly', async () => {
    const { result } = await afterRejection(NO_FAULTS, counted);
    expect(result.kind).toBe('logits');
    if (result.kind === 'logits') expect(Float32Array.from(result.logits)).toEqual(await truth());
  });

  it('fault keep-rejected-stamps: the miscounted read passes and attends to rejected K/V (a wrong answer)', async () => {
    const { result } = await afterRejection(new FaultSet(['keep-rejected-stamps']), miscounted);
    expect(result.kind).toBe('logits');
    if (result.kind === 'logits') expect(Float32Array.from(result.logits)).not.toEqual(await truth());
  });
});
