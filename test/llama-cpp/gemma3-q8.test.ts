// Gemma 3 quantized (beside gemma3.test.ts's f32, apart to keep each file under a minute):
// gen-model's gemma3-tiny as a q8_0 GGUF (norms f32, every matrix q8_0, as llama.cpp writes a
// Q8_0 file) against llama.cpp (node-llama-cpp 3.21.1, one thread, F32 KV), teacher-forced on
// llama.cpp's own greedy ids. Agreement is loose, as for q8_0 llama files: llama.cpp quantizes
// the activations to q8_0 for its dot products (and reads GELU from an f16 table) where Tessera
// keeps them f32, so top-1 must agree on at least 14 of 16 steps and the first step's
// log-probabilities correlate above 0.99.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../../src/engine/index.js';
import { genModel } from '../../src/gen/index.js';
import { loadModel } from '../../src/model/index.js';
import { correlation, LlamaCpp, tesseraTrace } from './drivers.js';

const STEPS = 16;

let root: string;
let llamaCpp: LlamaCpp;
let engine: Engine | undefined;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-gemma3-q8-'));
  llamaCpp = await LlamaCpp.start();
});
afterAll(async () => {
  await engine?.dispose();
  await llamaCpp?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('gemma3 q8_0: Tessera and llama.cpp', () => {
  it('top-1 agrees on at least 14 of 16 teacher-forced steps, first-step log-probabilities correlate > 0.99', async () => {
    const path = join(root, 'gemma3-q8_0.gguf');
    await genModel({ preset: 'gemma3-tiny', format: 'gguf', out: path, seed: 3, dtype: 'q8_0' });
    const model = await loadModel(path);
    expect(model.tensors.get('model.layers.0.mlp.down_proj.weight')?.dtype).toBe('q8_0');
    const prompt = model.tokenizer.encode('The quick brown fox jumps over the lazy dog. A second sentence, long.');
    const theirs = await llamaCpp.trace(path, prompt, STEPS);
    engine = await createEngine(model, { kvPages: 8, threads: 1 });
    const ours = await tesseraTrace(engine, prompt, STEPS, theirs.ids);
    const agree = ours.ids.filter((id, i) => id === theirs.ids[i]).length;
    const r = correlation(ours.firstLogProbs, theirs.firstLogProbs);
    console.log(`gemma3-tiny q8_0: top-1 agrees on ${agree} of ${STEPS} steps; first-step correlation ${r.toFixed(5)}`);
    expect(agree).toBeGreaterThanOrEqual(14);
    expect(r).toBeGreaterThan(0.99);
  });
});
