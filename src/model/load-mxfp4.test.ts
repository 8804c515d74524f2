// A gpt-oss GGUF with MXFP4 experts (gen-model --dtype mxfp4, llama.cpp's MXFP4_MOE mix) loads with
// its experts repacked exactly into q8_0 (the same values, twice the bytes), and says how much.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dequantize } from '../kernels/index.js';
import { dequantizeMxfp4, quantizeMxfp4 } from '../formats/index.js';
import { genModel, generateTensor, PRESET_CONFIGS } from '../gen/index.js';
import { loadModel, type LoadedModel } from './load.js';

describe('a gpt-oss GGUF with MXFP4 experts', () => {
  let root: string;
  let model: LoadedModel;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'tessera-mxfp4-'));
    const path = join(root, 'gpt-oss-tiny-mxfp4.gguf');
    await genModel({ preset: 'gpt-oss-tiny', format: 'gguf', out: path, seed: 3, dtype: 'mxfp4' });
    model = await loadModel(path);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('repacks each expert matrix to q8_0 holding exactly the MXFP4 values gen-model wrote', () => {
    const config = PRESET_CONFIGS['gpt-oss-tiny'];
    const name = 'model.layers.1.mlp.experts.7.down_proj.weight';
    const t = model.tensors.get(name)!;
    expect([t.dtype, t.shape]).toEqual(['q8_0', [128, 128]]);
    const got = new Float32Array(128 * 128);
    dequantize('q8_0', t.data, 0, got.length, got);
    const written = dequantizeMxfp4(quantizeMxfp4(generateTensor(config, name, [128, 128], 3)), 128 * 128);
    expect(got).toEqual(written);
    expect(model.tensors.get('model.layers.1.self_attn.q_proj.weight')!.dtype).toBe('q8_0'); // the rest: q8_0
    expect(model.tensors.get('model.layers.1.mlp.experts.7.down_proj.bias')!.dtype).toBe('f32');
  });

  it('counts what it repacked: 3 stacked tensors per layer, 17 bytes per 32 weights read, 34 written', () => {
    const weights = 4 * 3 * 16 * 128 * 128;
    expect(model.source.repacked).toEqual({
      tensors: 12,
      mxfp4Bytes: (weights / 32) * 17,
      repackedBytes: (weights / 32) * 34,
      bf16Tensors: 0,
    });
  });
});
