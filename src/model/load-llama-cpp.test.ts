// gen-model's GGUF against llama.cpp (node-llama-cpp@3.21.1): the file loads, its embedded
// tokenizer tokenizes as ours does, and its next-token distributions are as peaked as
// gen-model intends (greedy comparisons with llama.cpp need a stable argmax).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genModel } from '../gen/index.js';
import { loadModel, type LoadedModel } from './load.js';

type NodeLlamaCpp = typeof import('node-llama-cpp');
type LlamaModel = Awaited<ReturnType<Awaited<ReturnType<NodeLlamaCpp['getLlama']>>['loadModel']>>;

const TEXTS = [
  'Hello world',
  ' Hello  world\n\nfoo',
  'héllo 😀 日本語',
  'The quick brown fox jumps over the lazy dog.',
  '   leading spaces',
  'tab\tand\r\nCRLF',
  'emoji 🤖🧠 and 数学',
  '<s>[INST] special tokens [/INST]</s>',
];

let root: string;
let ours: LoadedModel;
let theirs: LlamaModel;
let dispose: () => Promise<void>;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-llamacpp-'));
  const modelPath = join(root, 'tiny.gguf');
  await genModel({ preset: 'tiny', format: 'gguf', out: modelPath, seed: 3 });
  ours = await loadModel(modelPath);
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  theirs = await llama.loadModel({ modelPath });
  dispose = async () => {
    await theirs.dispose();
    await llama.dispose();
  };
});
afterAll(async () => {
  await dispose?.();
  await rm(root, { recursive: true, force: true });
});

describe('a tiny GGUF from gen-model in llama.cpp', () => {
  it('has the special tokens we read', () => {
    expect([theirs.tokens.bos, theirs.tokens.eos]).toEqual([ours.tokenizer.bosTokenId, ours.tokenizer.eosTokenIds[0]]);
    expect(theirs.fileInfo.metadata.general.architecture).toBe('llama');
  });

  it.each(TEXTS)('tokenizes %j as we do, and detokenizes back to it', (text) => {
    const ids = ours.tokenizer.encode(text, { addSpecialTokens: false });
    expect([...theirs.tokenize(text, true)]).toEqual(ids);
    expect(theirs.detokenize(theirs.tokenize(text, true) as never, true)).toBe(ours.tokenizer.decode(ids));
  });

  it('gives peaked next-token distributions: logits with std about 8, a clear top-1 margin', async () => {
    const context = await theirs.createContext({ contextSize: 128, threads: 1, flashAttention: false });
    const sequence = context.getSequence();
    let input = ours.tokenizer.encode('Once upon a time');
    const margins: number[] = [];
    const stds: number[] = [];
    for (let step = 0; step < 16; step++) {
      const items = input.map((t, i) =>
        i < input.length - 1
          ? t
          : ([
              t,
              { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } },
            ] as const),
      );
      const results = await sequence.controlledEvaluate(items as never);
      const probabilities = [...results.at(-1)!.next!.probabilities!.entries()].sort((a, b) => b[1] - a[1]);
      const logProbs = probabilities.filter(([, p]) => p > 0).map(([, p]) => Math.log(p));
      const mean = logProbs.reduce((a, b) => a + b, 0) / logProbs.length;
      stds.push(Math.sqrt(logProbs.reduce((a, b) => a + (b - mean) ** 2, 0) / logProbs.length));
      margins.push(Math.log(probabilities[0]![1] / probabilities[1]![1]));
      input = [probabilities[0]![0]];
    }
    await context.dispose();
    const meanStd = stds.reduce((a, b) => a + b, 0) / stds.length;
    expect(meanStd).toBeGreaterThan(6);
    expect(meanStd).toBeLessThan(10);
    expect(Math.min(...margins)).toBeGreaterThan(1e-3);
    margins.sort((a, b) => a - b);
    expect(margins[8]!).toBeGreaterThan(0.3); // median top-1 margin, in logit units
  });
});
