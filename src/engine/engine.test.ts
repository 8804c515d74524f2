import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asRequestId, ConfigError, DEFAULT_TENANT, samplingParams, type Tag } from '../core/index.js';
import type { ModelConfig } from '../formats/index.js';
import {
  createRefDense,
  createWasmDense,
  createWasmOps,
  loadWasmRuntime,
  nativeAvailability,
  type DenseKernels,
  type DenseWeight,
  type OpKernels,
} from '../kernels/index.js';
import { PagePool } from '../pages/index.js';
import { allocKvView, createEngine, type Engine } from './engine.js';
import { ModelRunner } from './runner.js';
import { prepareWeights } from './weights-prepared.js';
import { generate } from './generate.js';
import { PRESET_CONFIGS, randomModel } from '../gen/index.js';

/** The tiny preset's shape with a small vocabulary, so the reference kernels stay quick. */
const CONFIG: ModelConfig = { ...PRESET_CONFIGS.tiny, vocabSize: 512 };
const MODEL = randomModel(CONFIG, 11);
const PROMPTS = [
  [1, 45, 300, 7, 99],
  [1, 8, 8, 8],
  [1, 200, 201, 202, 203, 204, 205],
  [1, 500],
];

/** Logits of every greedy step of one request running beside `others` (prefilled, then decoding along). */
async function greedyLogits(
  engine: Pick<Engine, 'pool' | 'runner'>,
  prompt: readonly number[],
  steps: number,
  others: readonly (readonly number[])[] = [],
): Promise<Float32Array[]> {
  const { pool, runner } = engine;
  const requests = [prompt, ...others].map((tokens, i) => {
    const owner = { rid: asRequestId(`r${i}`), tenant: DEFAULT_TENANT };
    const allocated = pool.ledger.allocate(4, owner);
    if (allocated.kind !== 'allocated') throw new Error('pool');
    return { owner, tags: allocated.tags as readonly Tag[], next: [...tokens], pos: 0 };
  });
  const out: Float32Array[] = [];
  try {
    for (let step = 0; step < steps; step++) {
      const results = await runner.step(
        requests.map((r) => ({ ...r.owner, tags: r.tags, tokens: r.next, startPos: r.pos, wantLogits: true })),
      );
      results.forEach((result, i) => {
        if (result.kind !== 'logits') throw new Error(result.kind);
        const r = requests[i]!;
        r.pos += r.next.length;
        let best = 0;
        for (let j = 1; j < result.logits.length; j++) if (result.logits[j]! > result.logits[best]!) best = j;
        r.next = [best];
        if (i === 0) out.push(result.logits.slice());
      });
    }
  } finally {
    for (const r of requests) pool.ledger.free(r.tags, r.owner);
  }
  return out;
}

let ref: Engine;
let fast: Engine;
let deterministic: Engine;
let wasm: Engine;
beforeAll(async () => {
  ref = await createEngine(MODEL, { kernels: 'ref', kvPages: 32 });
  fast = await createEngine(MODEL, { kvPages: 32, threads: 2 });
  deterministic = await createEngine(MODEL, { kvPages: 32, deterministic: true, threads: 2 });
  wasm = await createEngine(MODEL, { kernels: 'wasm', kvPages: 32, threads: 2 });
});
afterAll(async () => {
  for (const e of [ref, fast, deterministic, wasm]) await e?.dispose();
});

/** An engine over `dense` (not one planKernels builds): the negative control's. */
async function engineOver(dense: DenseKernels, ops: OpKernels): Promise<Pick<Engine, 'pool' | 'runner'>> {
  const weights = await prepareWeights(MODEL.config, MODEL.tensors, dense, ops);
  const pool = new PagePool({
    kv: allocKvView(ops, {
      numPages: 32,
      pageSize: 16,
      numLayers: CONFIG.numLayers,
      numKvHeads: CONFIG.numKvHeads,
      headDim: CONFIG.headDim,
      dtype: 'f32',
    }),
  });
  const runner = new ModelRunner({ config: CONFIG, weights, dense, ops, pool, maxStepTokens: 64, maxStepLogits: 8 });
  return { pool, runner };
}

/** Batches of one row on `one`, larger ones on `many`: the shape of the native + onnxruntime split this seam removed. */
function splitByBatch(one: DenseKernels, many: DenseKernels): DenseKernels {
  const pairs = new WeakMap<DenseWeight, [DenseWeight, DenseWeight]>();
  return {
    name: one.name,
    batchInvariant: false,
    async prepare(weight) {
      const pair: [DenseWeight, DenseWeight] = [await one.prepare(weight), await many.prepare(weight)];
      pairs.set(pair[0], pair);
      return pair[0];
    },
    matmul(weight, x, m, out) {
      const [w1, wm] = pairs.get(weight)!;
      return m === 1 ? one.matmul(w1, x, m, out) : many.matmul(wm, x, m, out);
    },
    dispose: async () => undefined,
  };
}

const bitIdentical = (a: readonly Float32Array[], b: readonly Float32Array[]): boolean =>
  a.length === b.length && a.every((x, i) => Buffer.from(x.buffer).equals(Buffer.from(b[i]!.buffer)));

describe('createEngine', () => {
  it('runs the plan of its --kernels choice: auto (and --deterministic) native where the addon runs, wasm, ref', () => {
    const native = 'addon' in nativeAvailability();
    const expected = native ? ['native', 'wasm+native', true] : ['wasm', 'wasm', true];
    for (const engine of [fast, deterministic])
      expect([engine.kernels.dense, engine.kernels.ops, engine.kernels.batchInvariant]).toEqual(expected);
    expect(fast.kernels.plan.backend).toBe(native ? 'native' : 'wasm');
    expect([wasm.kernels.dense, wasm.kernels.ops, wasm.kernels.plan.choice]).toEqual(['wasm', 'wasm', 'wasm']);
    expect([ref.kernels.dense, ref.kernels.ops]).toEqual(['ref', 'ref']);
    expect(fast.weightBytesPerToken).toBe(4 * (4 * (128 * 128 * 2 + 2 * 64 * 128 + 3 * 128 * 384) + 512 * 128));
    expect(fast.prepareMs).toBeGreaterThan(0);
  });

  it('the fast kernels (auto, deterministic, wasm) agree with the reference within 1e-3 over 6 greedy steps', async () => {
    const expected = await greedyLogits(ref, PROMPTS[0]!, 6);
    for (const engine of [fast, deterministic, wasm]) {
      const got = await greedyLogits(engine, PROMPTS[0]!, 6);
      got.forEach((logits, step) => {
        const maxDiff = Math.max(...logits.map((v, j) => Math.abs(v - expected[step]![j]!)));
        expect(maxDiff, `${engine.kernels.dense} step ${step}`).toBeLessThan(1e-3);
      });
    }
  });

  it("every backend is batch-invariant: a request's logits are bit-identical alone and beside three others", async () => {
    for (const engine of [deterministic, wasm, ref]) {
      const alone = await greedyLogits(engine, PROMPTS[0]!, 5);
      const together = await greedyLogits(engine, PROMPTS[0]!, 5, PROMPTS.slice(1));
      expect(bitIdentical(alone, together), `${engine.kernels.dense}`).toBe(true);
    }
  });

  it('negative control: a dense path that changes backend with the batch size fails that check', async () => {
    const runtime = await loadWasmRuntime();
    const ops = await createWasmOps({ runtime });
    const split = await engineOver(splitByBatch(await createWasmDense({ runtime }), createRefDense()), ops);
    const alone = await greedyLogits(split, PROMPTS[0]!, 3);
    const together = await greedyLogits(split, PROMPTS[0]!, 3, PROMPTS.slice(1));
    expect(bitIdentical(alone, together)).toBe(false);
  });
});

describe('generate', () => {
  it('is reproducible for a seed, differs for another, and greedy does not depend on the seed', async () => {
    const run = async (temperature: number, seed: number) =>
      (
        await generate(fast.runner, [
          { promptIds: PROMPTS[0]!, sampling: samplingParams({ maxTokens: 12, temperature, seed, ignoreEos: true }) },
        ])
      ).outputs[0]!.ids;
    expect(await run(1, 3)).toEqual(await run(1, 3));
    expect(await run(1, 3)).not.toEqual(await run(1, 4));
    expect(await run(0, 3)).toEqual(await run(0, 4));
  });

  it('stops at a stop token (not returned) or at maxTokens, and frees every page', async () => {
    const sampling = samplingParams({ maxTokens: 10, ignoreEos: true });
    const { outputs } = await generate(fast.runner, [{ promptIds: PROMPTS[1]!, sampling }]);
    expect(outputs[0]).toMatchObject({ finishReason: 'length' });
    expect(outputs[0]!.ids).toHaveLength(10);
    const stopAt = outputs[0]!.ids[3]!;
    const firstStop = outputs[0]!.ids.indexOf(stopAt);
    const stopped = await generate(fast.runner, [
      { promptIds: PROMPTS[1]!, sampling: { ...sampling, stopTokenIds: [stopAt] } },
    ]);
    expect(stopped.outputs[0]).toEqual({ ids: outputs[0]!.ids.slice(0, firstStop), finishReason: 'stop' });
    expect(fast.pool.ledger.numFree).toBe(32);
  });

  it('runs several requests in lockstep with the same greedy output as one by one (reference kernels)', async () => {
    const sampling = samplingParams({ maxTokens: 6, ignoreEos: true });
    const together = await generate(
      ref.runner,
      PROMPTS.map((promptIds) => ({ promptIds, sampling })),
    );
    for (const [i, promptIds] of PROMPTS.entries()) {
      expect((await generate(ref.runner, [{ promptIds, sampling }])).outputs[0]).toEqual(together.outputs[i]);
    }
    expect(together.timing.numDecodeSteps).toBe(5);
  });

  it('refuses prompts outside the vocabulary or beyond the context, and a pool too small, with ConfigError', async () => {
    const sampling = samplingParams({ maxTokens: 4 });
    await expect(generate(fast.runner, [{ promptIds: [1, 512], sampling }])).rejects.toThrow(ConfigError);
    await expect(
      generate(fast.runner, [{ promptIds: [1], sampling: { ...sampling, maxTokens: 4096 } }]),
    ).rejects.toThrow(/exceed the model's 4096 positions/);
    await expect(
      generate(fast.runner, [{ promptIds: [1], sampling: { ...sampling, maxTokens: 1000 } }]),
    ).rejects.toThrow(/32 free pages; this request needs 63/);
    expect(fast.pool.ledger.numFree).toBe(32);
  });
});
