// Qwen3 (per-head q/k RMSNorm before RoPE, head dim wider than hidden / heads, no Q/K permutation
// in GGUF) against llama.cpp (node-llama-cpp 3.21.1, one thread, F32 KV): gen-model's qwen3-tiny
// (Qwen3's real tokenizer) as an f32 GGUF tokenizes as llama.cpp does, gives the same 32 greedy
// ids and first-step logits within 1e-3, as llama f32 files do (llama-cpp.test.ts); its HF
// directory gives bit-identical logits to its GGUF.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../../src/engine/index.js';
import { genModel } from '../../src/gen/index.js';
import { loadModel } from '../../src/model/index.js';
import { LlamaCpp, maxLogProbDiff, tesseraTrace, type StepTrace } from './drivers.js';

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  ' Hello  world\n\nfoo 12345',
  'héllo 😀 日本語 数学',
  '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
];
const STEPS = 32;

let root: string;
let llamaCpp: LlamaCpp;
const engines: Engine[] = [];
/** llama.cpp's trace of the qwen3 GGUF (first test), for the negative control. */
let reference: StepTrace | undefined;
/** TEXTS[0] in Qwen3's vocabulary (no BOS: Qwen3 adds none), set by the first test. */
let PROMPT: number[] = [];

async function engineFor(path: string): Promise<Engine> {
  const engine = await createEngine(await loadModel(path), { kvPages: 16, threads: 1 });
  engines.push(engine);
  return engine;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-qwen3-'));
  llamaCpp = await LlamaCpp.start();
});
afterAll(async () => {
  for (const e of engines) await e.dispose();
  await llamaCpp?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('qwen3: Tessera and llama.cpp', () => {
  it('an f32 GGUF from gen-model: tokenizes as llama.cpp; the same 32 greedy ids, first-step logits within 1e-3', async () => {
    const path = join(root, 'qwen3.gguf');
    await genModel({ preset: 'qwen3-tiny', format: 'gguf', out: path, seed: 3 });
    const model = await loadModel(path);
    expect(model.config.arch).toBe('qwen3');
    const theirModel = await llamaCpp.llama.loadModel({ modelPath: path });
    for (const text of TEXTS)
      expect([...theirModel.tokenize(text, true)], text).toEqual(
        model.tokenizer.encode(text, { addSpecialTokens: false }),
      );
    await theirModel.dispose();
    PROMPT = model.tokenizer.encode(TEXTS[0]!);
    const theirs = await llamaCpp.trace(path, PROMPT, STEPS);
    reference = theirs;
    const ours = await tesseraTrace(await engineFor(path), PROMPT, STEPS);
    const { maxDiff, numCompared } = maxLogProbDiff(ours.firstLogProbs, theirs.firstLogProbs);
    console.log(
      `qwen3-tiny: max |logit diff| ${maxDiff.toExponential(2)} over ${numCompared} tokens; smallest greedy margin ${Math.min(...theirs.margins).toFixed(3)}`,
    );
    expect(numCompared).toBeGreaterThan(30_000);
    expect(maxDiff).toBeLessThan(1e-3);
    expect(ours.ids).toEqual(theirs.ids);
    expect(new Set(theirs.ids).size).toBeGreaterThan(8);
  });

  it('the HF directory (Qwen3ForCausalLM) and the GGUF of one seed give bit-identical logits', async () => {
    const hf = join(root, 'qwen3-hf');
    await genModel({ preset: 'qwen3-tiny', format: 'hf', out: hf, seed: 3 });
    const fromHf = await tesseraTrace(await engineFor(hf), PROMPT, 4);
    const fromGguf = await tesseraTrace(await engineFor(join(root, 'qwen3.gguf')), PROMPT, 4);
    expect(fromHf.ids).toEqual(fromGguf.ids);
    expect(Buffer.from(fromHf.firstLogProbs.buffer).equals(Buffer.from(fromGguf.firstLogProbs.buffer))).toBe(true);
  });

  it('negative control: the same weights run without the q/k norms are far from llama.cpp', async () => {
    const path = join(root, 'qwen3.gguf');
    const model = await loadModel(path);
    const withoutNorms = {
      ...model,
      config: { ...model.config, arch: 'qwen2' as const },
      tensors: new Map([...model.tensors].filter(([n]) => !/\.(q_norm|k_norm)\./.test(n))),
    };
    const engine = await createEngine(withoutNorms, { kvPages: 16, threads: 1 });
    engines.push(engine);
    const ours = await tesseraTrace(engine, PROMPT, 1);
    const { maxDiff } = maxLogProbDiff(ours.firstLogProbs, reference!.firstLogProbs);
    expect(maxDiff).toBeGreaterThan(0.1);
  });
});
