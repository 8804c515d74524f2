// Gemma 3 (scaled embeddings, q/k norms, pre/post norms, GELU-tanh, local sliding-window layers
// with their own RoPE base around a global one) against llama.cpp (node-llama-cpp 3.21.1, one
// thread, F32 KV): gen-model's gemma3-tiny (Gemma 3's real tokenizer) as an f32 GGUF tokenizes as
// llama.cpp does and gives the same 10 greedy ids, with a prompt longer than the 16-token window so
// the local layers' mask decides the very first logits. Tolerance on those logits: 0.05, not the
// 1e-3 of llama f32 files, because llama.cpp's CPU GELU reads a table of f16 values (input and
// output rounded to f16, ggml's GGML_GELU_FP16); measured here about 0.01-0.02. Negative control:
// the same weights with every layer global are far from llama.cpp. (gemma3-hf-gguf.test.ts: the
// HF directory of the same seed gives this GGUF's logits bit for bit.)
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../../src/engine/index.js';
import { genModel } from '../../src/gen/index.js';
import { loadModel, type LoadedModel } from '../../src/model/index.js';
import { LlamaCpp, maxLogProbDiff, tesseraTrace, type StepTrace } from './drivers.js';

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  ' Hello  world\n\nfoo 12345',
  'héllo 😀 日本語 数学',
  '<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n',
];
/** 25 tokens with <bos>: past the 16-token window of the local layers. */
const PROMPT_TEXT = 'The quick brown fox jumps over the lazy dog. A second sentence keeps the prompt long enough.';
const STEPS = 10;
const LOGIT_TOLERANCE = 0.05;

let root: string;
let gguf: string;
let llamaCpp: LlamaCpp;
const engines: Engine[] = [];
/** llama.cpp's trace of the GGUF and our load of it (first test), for the other tests. */
let reference: StepTrace | undefined;
let fromGgufModel: LoadedModel | undefined;
let PROMPT: number[] = [];

async function engineFor(model: LoadedModel | string): Promise<Engine> {
  const engine = await createEngine(typeof model === 'string' ? await loadModel(model) : model, {
    kvPages: 16,
    threads: 1,
  });
  engines.push(engine);
  return engine;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-gemma3-'));
  gguf = join(root, 'gemma3.gguf');
  llamaCpp = await LlamaCpp.start();
});
afterAll(async () => {
  for (const e of engines) await e.dispose();
  await llamaCpp?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('gemma3: Tessera and llama.cpp', () => {
  it('an f32 GGUF from gen-model: tokenizes as llama.cpp; the same greedy ids, first logits within 0.05', async () => {
    await genModel({ preset: 'gemma3-tiny', format: 'gguf', out: gguf, seed: 3 });
    const model = await loadModel(gguf);
    fromGgufModel = model;
    expect(model.config.arch).toBe('gemma3');
    expect(model.config.gemma3?.localLayers).toEqual([true, true, true, true, true, false, true]);
    const theirModel = await llamaCpp.llama.loadModel({ modelPath: gguf });
    for (const text of TEXTS)
      expect([...theirModel.tokenize(text, true)], text).toEqual(
        model.tokenizer.encode(text, { addSpecialTokens: false }),
      );
    await theirModel.dispose();
    PROMPT = model.tokenizer.encode(PROMPT_TEXT);
    expect(PROMPT[0]).toBe(2); // <bos>
    expect(PROMPT.length).toBeGreaterThan(model.config.gemma3!.slidingWindow);
    const theirs = await llamaCpp.trace(gguf, PROMPT, STEPS);
    reference = theirs;
    const ours = await tesseraTrace(await engineFor(model), PROMPT, STEPS);
    const { maxDiff, numCompared } = maxLogProbDiff(ours.firstLogProbs, theirs.firstLogProbs);
    console.log(
      `gemma3-tiny: max |logit diff| ${maxDiff.toExponential(2)} over ${numCompared} tokens; smallest greedy margin ${Math.min(...theirs.margins).toFixed(3)}`,
    );
    expect(numCompared).toBeGreaterThan(100_000);
    expect(maxDiff).toBeLessThan(LOGIT_TOLERANCE);
    expect(ours.ids).toEqual(theirs.ids);
    expect(new Set(theirs.ids).size).toBeGreaterThan(8);
  });

  it('negative control: the same weights with every layer global (no sliding window) are far from llama.cpp', async () => {
    const model = fromGgufModel!;
    const g = model.config.gemma3!;
    const allGlobal = {
      ...model,
      config: { ...model.config, gemma3: { ...g, localLayers: g.localLayers.map(() => false) } },
    };
    const ours = await tesseraTrace(await engineFor(allGlobal), PROMPT, 1);
    const { maxDiff } = maxLogProbDiff(ours.firstLogProbs, reference!.firstLogProbs);
    expect(maxDiff).toBeGreaterThan(10 * LOGIT_TOLERANCE);
  });
});
