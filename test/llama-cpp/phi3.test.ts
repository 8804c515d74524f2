// Phi-3 (fused qkv and gate_up tensors, split at load into zero-copy views; no Q/K permutation
// in GGUF) against llama.cpp (node-llama-cpp 3.21.1, one thread, F32 KV): gen-model's phi3-tiny
// as an f32 GGUF gives the same 32 greedy ids and first-step logits within 1e-3; as q8_0 the
// fused rows stay quantized and agree loosely (as q8_0 llama files do: llama.cpp quantizes
// activations); its HF directory (Phi3ForCausalLM, qkv_proj / gate_up_proj) gives bit-identical
// logits to its GGUF.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../../src/engine/index.js';
import { genModel } from '../../src/gen/index.js';
import { loadModel } from '../../src/model/index.js';
import { correlation, LlamaCpp, maxLogProbDiff, tesseraTrace } from './drivers.js';

/** "The quick brown fox jumps over the lazy dog" in the Llama 2 vocabulary, BOS first. */
const PROMPT = [1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203];
const STEPS = 32;

let root: string;
let llamaCpp: LlamaCpp;
const engines: Engine[] = [];

async function engineFor(path: string): Promise<Engine> {
  const engine = await createEngine(await loadModel(path), { kvPages: 16, threads: 1 });
  engines.push(engine);
  return engine;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-phi3-'));
  llamaCpp = await LlamaCpp.start();
});
afterAll(async () => {
  for (const e of engines) await e.dispose();
  await llamaCpp?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('phi3: Tessera and llama.cpp', () => {
  it('an f32 GGUF from gen-model (attn_qkv, fused ffn_up): the same 32 greedy ids, first-step logits within 1e-3', async () => {
    const path = join(root, 'phi3.gguf');
    await genModel({ preset: 'phi3-tiny', format: 'gguf', out: path, seed: 3 });
    const model = await loadModel(path);
    expect(model.config.arch).toBe('phi3');
    expect(model.tensors.has('model.layers.0.self_attn.k_proj.weight')).toBe(true);
    const theirs = await llamaCpp.trace(path, PROMPT, STEPS);
    const ours = await tesseraTrace(await engineFor(path), PROMPT, STEPS);
    const { maxDiff, numCompared } = maxLogProbDiff(ours.firstLogProbs, theirs.firstLogProbs);
    console.log(
      `phi3-tiny: max |logit diff| ${maxDiff.toExponential(2)} over ${numCompared} tokens; smallest greedy margin ${Math.min(...theirs.margins).toFixed(3)}`,
    );
    expect(numCompared).toBeGreaterThan(30_000);
    expect(maxDiff).toBeLessThan(1e-3);
    expect(ours.ids).toEqual(theirs.ids);
    expect(new Set(theirs.ids).size).toBeGreaterThan(8);
  });

  it('q8_0: top-1 agrees on at least 29 of 32 teacher-forced steps, first-step log-probabilities correlate > 0.99', async () => {
    const path = join(root, 'phi3-q8_0.gguf');
    await genModel({ preset: 'phi3-tiny', format: 'gguf', out: path, seed: 3, dtype: 'q8_0' });
    const theirs = await llamaCpp.trace(path, PROMPT, STEPS);
    const ours = await tesseraTrace(await engineFor(path), PROMPT, STEPS, theirs.ids);
    expect(ours.ids.filter((id, i) => id === theirs.ids[i]).length).toBeGreaterThanOrEqual(29);
    expect(correlation(ours.firstLogProbs, theirs.firstLogProbs)).toBeGreaterThan(0.99);
  });

  it('the HF directory (Phi3ForCausalLM) and the GGUF of one seed give bit-identical logits', async () => {
    const hf = join(root, 'phi3-hf');
    await genModel({ preset: 'phi3-tiny', format: 'hf', out: hf, seed: 3 });
    const fromHf = await tesseraTrace(await engineFor(hf), PROMPT, 4);
    const fromGguf = await tesseraTrace(await engineFor(join(root, 'phi3.gguf')), PROMPT, 4);
    expect(fromHf.ids).toEqual(fromGguf.ids);
    expect(Buffer.from(fromHf.firstLogProbs.buffer).equals(Buffer.from(fromGguf.firstLogProbs.buffer))).toBe(true);
  });
});
