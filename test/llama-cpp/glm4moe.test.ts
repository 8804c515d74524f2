// GLM-4.5 (glm4moe: q/k/v bias, q/k norms, partial NeoX RoPE on half of each head; layer 0 a dense
// SwiGLU, then 16 routed experts, 4 per token by sigmoid score + correction bias, normalised and
// scaled by 2.5, beside one shared expert) against llama.cpp (node-llama-cpp 3.21.1, one thread,
// F32 KV, its glm4moe graph: build_moe_ffn with gating func sigmoid and exp_probs_b): gen-model's
// glm4moe-tiny as GGUF.
// The default run is short (f32 over 8 steps and the negative controls); MOE_AGREEMENT=full
// (`npm run test:moe-agreement`, minutes) runs 32 steps, q8_0 and the HF directory.
//   - f32: the same greedy ids and first-step logits within 1e-3;
//   - q8_0: teacher-forced on llama.cpp's greedy ids, top-1 agrees on 29 of 32 steps and first-step
//     log-probabilities correlate above 0.99 (qwen3moe.test.ts's bound for quantized files);
//   - the HF directory (Glm4MoeForCausalLM, one tensor per expert) gives bit-identical logits to
//     the GGUF of the same seed;
//   - negative controls, each far from llama.cpp: no correction bias in the choice, no routed
//     scaling factor, softmax routing, the whole head rotated (no partial RoPE); each config
//     change also changes the fingerprint (PD moves KV only between equal ones).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createEngine,
  genModel,
  loadModel,
  modelFingerprint,
  type Engine,
  type GenDType,
} from '../../src/model/index.js';
import { correlation, LlamaCpp, maxLogProbDiff, tesseraTrace, type StepTrace } from './drivers.js';

const FULL = process.env['MOE_AGREEMENT'] === 'full';
const STEPS = FULL ? 32 : 8;
const AGREE = STEPS - Math.ceil((3 * STEPS) / 32);
const TEXT = 'The quick brown fox jumps over the lazy dog.';

let root: string;
let llamaCpp: LlamaCpp;
const engines: Engine[] = [];
let PROMPT: number[] = [];
let reference: StepTrace | undefined;
let f32Model: Awaited<ReturnType<typeof loadModel>> | undefined;

async function engineFor(model: Parameters<typeof createEngine>[0]): Promise<Engine> {
  const engine = await createEngine(model, { kvPages: 16, threads: 1 });
  engines.push(engine);
  return engine;
}

async function gen(dtype: GenDType): Promise<string> {
  const path = join(root, `glm4moe-${dtype}.gguf`);
  await genModel({ preset: 'glm4moe-tiny', format: 'gguf', out: path, seed: 5, dtype });
  return path;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-glm4moe-'));
  llamaCpp = await LlamaCpp.start();
});
afterAll(async () => {
  for (const e of engines) await e.dispose();
  await llamaCpp?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('glm4moe: Tessera and llama.cpp', () => {
  it(`an f32 GGUF from gen-model: the same ${STEPS} greedy ids, first-step logits within 1e-3`, async () => {
    const path = await gen('f32');
    const model = await loadModel(path);
    f32Model = model;
    expect(model.config.moe).toEqual({
      numExperts: 16,
      numExpertsUsed: 4,
      expertIntermediateSize: 128,
      normTopkProb: true,
      gating: 'sigmoid',
      routedScalingFactor: 2.5,
      numSharedExperts: 1,
      firstDenseLayers: 1,
    });
    expect([model.config.ropeDims, model.config.qkNorm, model.config.attentionBias]).toEqual([32, true, true]);
    PROMPT = model.tokenizer.encode(TEXT);
    const theirs = await llamaCpp.trace(path, PROMPT, STEPS);
    reference = theirs;
    const ours = await tesseraTrace(await engineFor(model), PROMPT, STEPS);
    const { maxDiff, numCompared } = maxLogProbDiff(ours.firstLogProbs, theirs.firstLogProbs);
    console.log(
      `glm4moe-tiny f32: max |logit diff| ${maxDiff.toExponential(2)} over ${numCompared} tokens; greedy ids agree ${ours.ids.filter((id, i) => id === theirs.ids[i]).length}/${STEPS}; smallest greedy margin ${Math.min(...theirs.margins).toFixed(3)}`,
    );
    expect(numCompared).toBeGreaterThan(30_000);
    expect(maxDiff).toBeLessThan(1e-3);
    expect(ours.ids).toEqual(theirs.ids);
    expect(new Set(theirs.ids).size).toBeGreaterThan(STEPS / 4);
  });

  it.runIf(FULL)(
    `q8_0: top-1 agrees on at least ${AGREE} of ${STEPS} teacher-forced steps, first-step log-probabilities correlate > 0.99`,
    async () => {
      const path = await gen('q8_0');
      const theirs = await llamaCpp.trace(path, PROMPT, STEPS);
      const ours = await tesseraTrace(await engineFor(await loadModel(path)), PROMPT, STEPS, theirs.ids);
      const agree = ours.ids.filter((id, i) => id === theirs.ids[i]).length;
      const r = correlation(ours.firstLogProbs, theirs.firstLogProbs);
      const { maxDiff } = maxLogProbDiff(ours.firstLogProbs, theirs.firstLogProbs);
      console.log(
        `glm4moe-tiny q8_0: top-1 agrees on ${agree}/${STEPS}; first-step correlation ${r.toFixed(5)}, max |logit diff| ${maxDiff.toFixed(4)}`,
      );
      expect(agree).toBeGreaterThanOrEqual(AGREE);
      expect(r).toBeGreaterThan(0.99);
    },
  );

  it.runIf(FULL)(
    'the HF directory (Glm4MoeForCausalLM) and the GGUF of one seed give bit-identical logits',
    async () => {
      const hf = join(root, 'glm4moe-hf');
      await genModel({ preset: 'glm4moe-tiny', format: 'hf', out: hf, seed: 5 });
      const fromHf = await tesseraTrace(await engineFor(await loadModel(hf)), PROMPT, 4);
      const fromGguf = await tesseraTrace(await engineFor(f32Model!), PROMPT, 4);
      expect(fromHf.ids).toEqual(fromGguf.ids);
      expect(Buffer.from(fromHf.firstLogProbs.buffer).equals(Buffer.from(fromGguf.firstLogProbs.buffer))).toBe(true);
    },
  );

  it('negative controls: no correction bias, no scaling, softmax routing or full RoPE are far from llama.cpp, each its own fingerprint', async () => {
    const model = f32Model!;
    const moe = model.config.moe!;
    const noBias = new Map(model.tensors);
    for (const [name, t] of noBias)
      if (name.endsWith('e_score_correction_bias')) noBias.set(name, { ...t, data: new Uint8Array(t.data.length) });
    const variants = [
      { ...model, tensors: noBias },
      { ...model, config: { ...model.config, moe: { ...moe, routedScalingFactor: 1 } } },
      { ...model, config: { ...model.config, moe: { ...moe, gating: 'softmax' as const } } },
      { ...model, config: { ...model.config, ropeDims: model.config.headDim } },
    ];
    const prints = new Set([model, ...variants].map((m) => modelFingerprint(m)));
    expect(prints.size).toBe(variants.length + 1);
    for (const variant of variants) {
      const ours = await tesseraTrace(await engineFor(variant), PROMPT, 1);
      const { maxDiff } = maxLogProbDiff(ours.firstLogProbs, reference!.firstLogProbs);
      expect(maxDiff, JSON.stringify(variant.config.moe) + String(variant.config.ropeDims)).toBeGreaterThan(0.1);
    }
  });
});
