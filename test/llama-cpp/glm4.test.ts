// GLM-4 (dense glm4, GLM-4-0414's layout: q/k/v bias, partial RoPE on half of each head in adjacent
// pairs as llama.cpp's NORM rope, sandwich norms around attention and MLP, gate|up fused in its
// files) against llama.cpp (node-llama-cpp 3.21.1, one thread, F32 KV, its glm4 graph): gen-model's
// glm4-tiny as GGUF. The default run is f32 over 8 steps and the negative controls;
// MOE_AGREEMENT=full (`npm run test:moe-agreement`) runs 32 steps, q8_0 and the HF directory.
//   - f32 (seed 7: its 32 greedy steps have no near-tie, margin 0.021): the same greedy ids and first-step logits within 1e-3;
//   - q8_0: teacher-forced top-1 agrees on 29 of 32 steps, first-step correlation > 0.99;
//   - the HF directory (Glm4ForCausalLM, mlp.gate_up_proj) and the GGUF of one seed give
//     bit-identical logits;
//   - negative controls, each far from llama.cpp: the whole head rotated, the q/k/v biases zeroed.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, genModel, loadModel, type Engine, type GenDType } from '../../src/model/index.js';
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
  const path = join(root, `glm4-${dtype}.gguf`);
  await genModel({ preset: 'glm4-tiny', format: 'gguf', out: path, seed: 7, dtype });
  return path;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-glm4-'));
  llamaCpp = await LlamaCpp.start();
});
afterAll(async () => {
  for (const e of engines) await e.dispose();
  await llamaCpp?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('glm4: Tessera and llama.cpp', () => {
  it(`an f32 GGUF from gen-model: the same ${STEPS} greedy ids, first-step logits within 1e-3`, async () => {
    const path = await gen('f32');
    const model = await loadModel(path);
    f32Model = model;
    expect([model.config.arch, model.config.ropeDims, model.config.attentionBias]).toEqual(['glm4', 32, true]);
    PROMPT = model.tokenizer.encode(TEXT);
    const theirs = await llamaCpp.trace(path, PROMPT, STEPS);
    reference = theirs;
    const ours = await tesseraTrace(await engineFor(model), PROMPT, STEPS);
    const { maxDiff, numCompared } = maxLogProbDiff(ours.firstLogProbs, theirs.firstLogProbs);
    console.log(
      `glm4-tiny f32: max |logit diff| ${maxDiff.toExponential(2)} over ${numCompared} tokens; greedy ids agree ${ours.ids.filter((id, i) => id === theirs.ids[i]).length}/${STEPS}; smallest greedy margin ${Math.min(...theirs.margins).toFixed(3)}`,
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
        `glm4-tiny q8_0: top-1 agrees on ${agree}/${STEPS}; first-step correlation ${r.toFixed(5)}, max |logit diff| ${maxDiff.toFixed(4)}`,
      );
      expect(agree).toBeGreaterThanOrEqual(AGREE);
      expect(r).toBeGreaterThan(0.99);
    },
  );

  it.runIf(FULL)('the HF directory (Glm4ForCausalLM) and the GGUF of one seed give bit-identical logits', async () => {
    const hf = join(root, 'glm4-hf');
    await genModel({ preset: 'glm4-tiny', format: 'hf', out: hf, seed: 7 });
    const fromHf = await tesseraTrace(await engineFor(await loadModel(hf)), PROMPT, 4);
    const fromGguf = await tesseraTrace(await engineFor(f32Model!), PROMPT, 4);
    expect(fromHf.ids).toEqual(fromGguf.ids);
    expect(Buffer.from(fromHf.firstLogProbs.buffer).equals(Buffer.from(fromGguf.firstLogProbs.buffer))).toBe(true);
  });

  it('negative controls: the whole head rotated, or the q/k/v biases zeroed, are far from llama.cpp', async () => {
    const model = f32Model!;
    const noBias = new Map(model.tensors);
    for (const [name, t] of noBias)
      if (/_proj\.bias$/.test(name)) noBias.set(name, { ...t, data: new Uint8Array(t.data.length) });
    for (const variant of [
      { ...model, config: { ...model.config, ropeDims: model.config.headDim } },
      { ...model, tensors: noBias },
    ]) {
      const ours = await tesseraTrace(await engineFor(variant), PROMPT, 1);
      const { maxDiff } = maxLogProbDiff(ours.firstLogProbs, reference!.firstLogProbs);
      expect(maxDiff).toBeGreaterThan(0.1);
    }
  });
});
