// Qwen3-MoE (Qwen3's attention; every layer's MLP 16 routed experts, 4 per token, softmax then
// renormalised top-k, no shared expert) against llama.cpp (node-llama-cpp 3.21.1, one thread, F32
// KV, its qwen3moe graph: build_moe_ffn): gen-model's qwen3moe-tiny as GGUF in each dtype.
// The default run is short (f32 over 8 steps and the negative controls); MOE_AGREEMENT=full
// (`npm run test:moe-agreement`, minutes) runs 32 steps, every dtype below and the HF directory.
//   - f32: the same 32 greedy ids and first-step logits within 1e-3 (as qwen3.test.ts for dense);
//   - f16, q8_0, q4_k_m (at a 256-wide residual, so every matrix is a K-quant): teacher-forced on llama.cpp's greedy ids, top-1 agrees on at least 29 of
//     32 steps and first-step log-probabilities correlate above 0.99 (the K-quant files' bound,
//     k-quants.test.ts: activations are quantized per block on both sides, with different
//     rounding in places, and a routing near-tie may pick another expert for one token);
//   - the HF directory (Qwen3MoeForCausalLM, one tensor per expert) gives bit-identical logits to
//     the GGUF (3-D expert tensors) of the same seed;
//   - negative controls: the same weights routed without the renormalisation, or with one expert
//     fewer per token, are far from llama.cpp.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, genModel, loadModel, type Engine, type GenDType } from '../../src/model/index.js';
import { correlation, LlamaCpp, maxLogProbDiff, tesseraTrace, type StepTrace } from './drivers.js';

const FULL = process.env['MOE_AGREEMENT'] === 'full';
const STEPS = FULL ? 32 : 8;
/** Teacher-forced top-1 agreement asked of the quantized files: 29 of 32 (7 of 8). */
const AGREE = STEPS - Math.ceil((3 * STEPS) / 32);
const QUANTIZED: readonly GenDType[] = ['f16', 'q8_0', 'q4_k_m'];
const TEXT = 'The quick brown fox jumps over the lazy dog.';

let root: string;
let llamaCpp: LlamaCpp;
const engines: Engine[] = [];
let PROMPT: number[] = [];
/** llama.cpp's trace of the f32 GGUF and the model (first test). */
let reference: StepTrace | undefined;
let f32Model: Awaited<ReturnType<typeof loadModel>> | undefined;

async function engineFor(model: Parameters<typeof createEngine>[0]): Promise<Engine> {
  const engine = await createEngine(model, { kvPages: 16, threads: 1 });
  engines.push(engine);
  return engine;
}

/** K-quant mixes at a 256-wide residual: every matrix's rows whole super-blocks (else Q8_0 fallbacks). */
async function gen(dtype: GenDType): Promise<string> {
  const path = join(root, `qwen3moe-${dtype}.gguf`);
  const overrides = dtype === 'q4_k_m' ? { hiddenSize: 256 } : {};
  await genModel({ preset: 'qwen3moe-tiny', format: 'gguf', out: path, seed: 5, dtype, overrides });
  return path;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-qwen3moe-'));
  llamaCpp = await LlamaCpp.start();
});
afterAll(async () => {
  for (const e of engines) await e.dispose();
  await llamaCpp?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('qwen3moe: Tessera and llama.cpp', () => {
  it(`an f32 GGUF from gen-model: the same ${STEPS} greedy ids, first-step logits within 1e-3`, async () => {
    const path = await gen('f32');
    const model = await loadModel(path);
    f32Model = model;
    expect(model.config.moe).toEqual({
      numExperts: 16,
      numExpertsUsed: 4,
      expertIntermediateSize: 256,
      normTopkProb: true,
    });
    PROMPT = model.tokenizer.encode(TEXT);
    const theirs = await llamaCpp.trace(path, PROMPT, STEPS);
    reference = theirs;
    const ours = await tesseraTrace(await engineFor(model), PROMPT, STEPS);
    const { maxDiff, numCompared } = maxLogProbDiff(ours.firstLogProbs, theirs.firstLogProbs);
    console.log(
      `qwen3moe-tiny f32: max |logit diff| ${maxDiff.toExponential(2)} over ${numCompared} tokens; smallest greedy margin ${Math.min(...theirs.margins).toFixed(3)}`,
    );
    expect(numCompared).toBeGreaterThan(30_000);
    expect(maxDiff).toBeLessThan(1e-3);
    expect(ours.ids).toEqual(theirs.ids);
    expect(new Set(theirs.ids).size).toBeGreaterThan(STEPS / 4);
  });

  it.runIf(FULL).each(QUANTIZED)(
    `%s: top-1 agrees on at least ${AGREE} of ${STEPS} teacher-forced steps, first-step log-probabilities correlate > 0.99`,
    async (dtype) => {
      const path = await gen(dtype);
      const theirs = await llamaCpp.trace(path, PROMPT, STEPS);
      const ours = await tesseraTrace(await engineFor(await loadModel(path)), PROMPT, STEPS, theirs.ids);
      const agree = ours.ids.filter((id, i) => id === theirs.ids[i]).length;
      const r = correlation(ours.firstLogProbs, theirs.firstLogProbs);
      const { maxDiff } = maxLogProbDiff(ours.firstLogProbs, theirs.firstLogProbs);
      console.log(
        `qwen3moe-tiny ${dtype}: top-1 agrees on ${agree}/${STEPS}; first-step correlation ${r.toFixed(5)}, max |logit diff| ${maxDiff.toFixed(4)}`,
      );
      expect(agree).toBeGreaterThanOrEqual(AGREE);
      expect(r).toBeGreaterThan(0.99);
      expect(new Set(theirs.ids).size).toBeGreaterThan(STEPS / 8);
    },
  );

  it.runIf(FULL)(
    'the HF directory (Qwen3MoeForCausalLM) and the GGUF of one seed give bit-identical logits',
    async () => {
      const hf = join(root, 'qwen3moe-hf');
      await genModel({ preset: 'qwen3moe-tiny', format: 'hf', out: hf, seed: 5 });
      const fromHf = await tesseraTrace(await engineFor(await loadModel(hf)), PROMPT, 4);
      const fromGguf = await tesseraTrace(await engineFor(await loadModel(join(root, 'qwen3moe-f32.gguf'))), PROMPT, 4);
      expect(fromHf.ids).toEqual(fromGguf.ids);
      expect(Buffer.from(fromHf.firstLogProbs.buffer).equals(Buffer.from(fromGguf.firstLogProbs.buffer))).toBe(true);
    },
  );

  it('negative controls: unnormalised routing, or one expert fewer per token, are far from llama.cpp', async () => {
    const model = f32Model!;
    const moe = model.config.moe!;
    for (const changed of [
      { ...moe, normTopkProb: false },
      { ...moe, numExpertsUsed: moe.numExpertsUsed - 1 },
    ]) {
      const engine = await engineFor({ ...model, config: { ...model.config, moe: changed } });
      const ours = await tesseraTrace(engine, PROMPT, 1);
      const { maxDiff } = maxLogProbDiff(ours.firstLogProbs, reference!.firstLogProbs);
      expect(maxDiff, JSON.stringify(changed)).toBeGreaterThan(0.1);
    }
  });
});
