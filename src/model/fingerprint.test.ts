import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostTensor } from '../kernels/index.js';
import { modelFingerprint } from './fingerprint.js';
import { genModel, type GenOverrides } from '../gen/index.js';
import { loadModel, type LoadedModel } from './load.js';

const SMALL: GenOverrides = { hiddenSize: 64, headDim: 16, intermediateSize: 128, numLayers: 2 };
let root: string;
let hf: LoadedModel;

async function load(
  name: string,
  format: 'hf' | 'gguf',
  seed: number,
  dtype: 'f32' | 'f16' = 'f32',
): Promise<LoadedModel> {
  const out = join(root, format === 'gguf' ? `${name}.gguf` : name);
  await genModel({ preset: 'tiny', format, out, seed, dtype, overrides: SMALL });
  return loadModel(out);
}

/** `model` with one byte of one tensor changed. */
function withOneByteChanged(model: LoadedModel, name: string, at: number): LoadedModel {
  const tensors = new Map(model.tensors);
  const t = tensors.get(name) as HostTensor;
  const data = t.data.slice();
  data[at] = (data[at] as number) ^ 1;
  tensors.set(name, { ...t, data });
  return { ...model, tensors };
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-fingerprint-'));
  hf = await load('hf', 'hf', 3);
});
afterAll(async () => rm(root, { recursive: true, force: true }));

describe('modelFingerprint', () => {
  it('is 16 hex digits, the same for the HF and GGUF files of one seed and for a second load', async () => {
    const fp = modelFingerprint(hf);
    expect(fp).toMatch(/^[0-9a-f]{16}$/);
    expect(modelFingerprint(await load('gguf', 'gguf', 3))).toBe(fp);
    expect(modelFingerprint(await loadModel(join(root, 'hf')))).toBe(fp);
  });

  it('differs for another seed, another weight type, one changed byte of a layer, or a changed config field', async () => {
    const fp = modelFingerprint(hf);
    const others = [
      modelFingerprint(await load('seed4', 'hf', 4)),
      modelFingerprint(await load('f16', 'hf', 3, 'f16')),
      modelFingerprint(withOneByteChanged(hf, 'model.layers.1.self_attn.v_proj.weight', 100)),
      modelFingerprint(withOneByteChanged(hf, 'model.embed_tokens.weight', 0)),
      modelFingerprint({ ...hf, config: { ...hf.config, ropeTheta: hf.config.ropeTheta * 2 } }),
    ];
    expect(new Set([fp, ...others]).size).toBe(others.length + 1);
  });

  it('ignores what does not change the computation: the context length and token ids of the config', () => {
    const fp = modelFingerprint(hf);
    expect(modelFingerprint({ ...hf, config: { ...hf.config, maxPositionEmbeddings: 99, eosTokenIds: [7] } })).toBe(fp);
  });
});
