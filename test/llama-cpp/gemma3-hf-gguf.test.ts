// Gemma 3 from its two formats (the other half of gemma3.test.ts, apart to keep each file under a
// minute: Gemma 3's 262k-piece tokenizer takes seconds to build): gen-model's gemma3-tiny as a
// Hugging Face directory (Gemma3ForCausalLM, norm weights stored as w and applied as 1 + w) and
// as a GGUF (stored as 1 + w, as llama.cpp's converter writes them) of one seed give bit-identical
// logits and the same greedy ids, so the HF loader's + 1 is right where the GGUF agrees with
// llama.cpp; tied embeddings (Gemma's own) load from both too. Negative control: the HF weights
// with the norms used as stored (w) are far from the GGUF's.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../../src/engine/index.js';
import { genModel } from '../../src/gen/index.js';
import { loadModel, type LoadedModel } from '../../src/model/index.js';
import { maxLogProbDiff, tesseraTrace } from './drivers.js';

let root: string;
const engines: Engine[] = [];
let prompt: number[] = [];

async function engineFor(model: LoadedModel): Promise<Engine> {
  const engine = await createEngine(model, { kvPages: 8, threads: 1 });
  engines.push(engine);
  return engine;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-gemma3-hf-'));
});
afterAll(async () => {
  for (const e of engines) await e.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('gemma3: the HF directory and the GGUF of one seed', () => {
  it('give bit-identical logits and the same greedy ids, tied embeddings included', async () => {
    const overrides = { tieWordEmbeddings: true, numLayers: 6 };
    await genModel({ preset: 'gemma3-tiny', format: 'hf', out: join(root, 'hf'), seed: 5, overrides });
    await genModel({ preset: 'gemma3-tiny', format: 'gguf', out: join(root, 'm.gguf'), seed: 5, overrides });
    const [hf, gguf] = await Promise.all([loadModel(join(root, 'hf')), loadModel(join(root, 'm.gguf'))]);
    expect(hf.config).toEqual(gguf.config);
    expect(hf.config.tieWordEmbeddings).toBe(true);
    prompt = hf.tokenizer.encode('The quick brown fox jumps over the lazy dog. A second sentence makes it long.');
    expect(prompt.length).toBeGreaterThan(hf.config.gemma3!.slidingWindow);
    const fromHf = await tesseraTrace(await engineFor(hf), prompt, 4);
    const fromGguf = await tesseraTrace(await engineFor(gguf), prompt, 4);
    expect(fromHf.ids).toEqual(fromGguf.ids);
    expect(Buffer.from(fromHf.firstLogProbs.buffer).equals(Buffer.from(fromGguf.firstLogProbs.buffer))).toBe(true);

    // Negative control: the HF norm weights as stored (w, without the + 1).
    const tensors = new Map(hf.tensors);
    for (const [name, t] of tensors) {
      if (!name.endsWith('norm.weight')) continue;
      const values = new Float32Array(t.data.slice().buffer).map((v) => v - 1);
      tensors.set(name, { ...t, data: new Uint8Array(values.buffer) });
    }
    const asStored = await tesseraTrace(await engineFor({ ...hf, tensors }), prompt, 1);
    expect(maxLogProbDiff(asStored.firstLogProbs, fromGguf.firstLogProbs).maxDiff).not.toBeLessThan(1);
  });
});
