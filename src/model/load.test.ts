import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { f16ToF32, f32ToBf16, f32ToF16, bf16ToF32, quantize } from '../kernels/index.js';
import { genModel, type GenOverrides, generateTensor, PRESET_CONFIGS } from '../gen/index.js';
import { tensorToF32, encodeSafetensors, readSafetensors } from '../formats/index.js';
import { loadModel, loadModelInfo, type LoadedModel } from './load.js';

const SEED = 5;
/** A smaller shape for the weight-type tests (the 32000-row embeddings dominate anyway). */
const SMALL: GenOverrides = { hiddenSize: 64, headDim: 16, intermediateSize: 128, numLayers: 2 };
let root: string;
let hf: LoadedModel;
let gg: LoadedModel;

async function gen(
  name: string,
  format: 'hf' | 'gguf',
  dtype: 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q4_0' = 'f32',
  overrides?: GenOverrides,
): Promise<string> {
  const out = join(root, format === 'gguf' ? `${name}.gguf` : name);
  await genModel({ preset: 'tiny', format, out, seed: SEED, dtype, ...(overrides ? { overrides } : {}) });
  return out;
}

async function loadError(path: string): Promise<ModelLoadError> {
  try {
    await loadModel(path);
  } catch (error) {
    expect(error).toBeInstanceOf(ModelLoadError);
    return error as ModelLoadError;
  }
  throw new Error(`expected ${path} to fail to load`);
}

/** A copy of the f32 HF model directory, to break in one way. */
async function hfCopy(name: string): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir);
  for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors'])
    await copyFile(join(root, 'hf', f), join(dir, f));
  return dir;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-load-'));
  hf = await loadModel(await gen('hf', 'hf'));
  gg = await loadModel(await gen('tiny', 'gguf'));
});
afterAll(async () => rm(root, { recursive: true, force: true }));

describe('the HF and GGUF files of one seed', () => {
  it('give the same config, the preset config', () => {
    expect(hf.config).toEqual(PRESET_CONFIGS.tiny);
    expect(gg.config).toEqual(PRESET_CONFIGS.tiny);
    expect(hf.source).toMatchObject({ format: 'hf', files: [join(root, 'hf', 'model.safetensors')] });
    expect(gg.source).toMatchObject({ format: 'gguf', files: [join(root, 'tiny.gguf')] });
  });

  it('give byte-identical f32 tensors under canonical names (GGUF Q/K un-permuted)', () => {
    expect([...gg.tensors.keys()]).toEqual([...hf.tensors.keys()]);
    for (const [name, t] of hf.tensors) {
      const u = gg.tensors.get(name)!;
      expect([u.dtype, u.shape]).toEqual([t.dtype, t.shape]);
      expect(Buffer.compare(u.data, t.data), name).toBe(0);
    }
    expect(tensorToF32(hf.tensors.get('model.layers.1.self_attn.k_proj.weight')!)).toEqual(
      generateTensor(PRESET_CONFIGS.tiny, 'model.layers.1.self_attn.k_proj.weight', [64, 128], SEED),
    );
  });

  it('give the same tokenizer and chat template', () => {
    for (const text of ['Hello world', 'héllo 😀 日本語\n', '<s>[INST] hi [/INST]']) {
      expect(gg.tokenizer.encode(text)).toEqual(hf.tokenizer.encode(text));
    }
    expect(gg.chatTemplate.text).toBe(hf.chatTemplate.text);
    expect(gg.chatTemplate.render([{ role: 'user', content: 'hi' }])).toBe('<s>[INST] hi [/INST]');
  });
});

describe('weight types', () => {
  it('f16: HF and GGUF matrices are bit-identical; GGUF keeps norms in f32', async () => {
    const a = await loadModel(await gen('hf16', 'hf', 'f16', SMALL));
    const b = await loadModel(await gen('f16', 'gguf', 'f16', SMALL));
    const q = 'model.layers.0.self_attn.q_proj.weight';
    expect(Buffer.compare(a.tensors.get(q)!.data, b.tensors.get(q)!.data)).toBe(0);
    expect(a.tensors.get(q)!.dtype).toBe('f16');
    const norm = 'model.layers.0.input_layernorm.weight';
    expect([a.tensors.get(norm)!.dtype, b.tensors.get(norm)!.dtype]).toEqual(['f16', 'f32']);
    expect(tensorToF32(a.tensors.get(norm)!)).toEqual(
      tensorToF32(b.tensors.get(norm)!).map((v) => f16ToF32(f32ToF16(v))),
    );
  });

  it('bf16 (HF) holds the rounded generated values', async () => {
    const m = await loadModel(await gen('hfbf16', 'hf', 'bf16', SMALL));
    const name = 'model.layers.1.mlp.down_proj.weight';
    const expected = generateTensor(m.config, name, [64, 128], SEED).map((v) => bf16ToF32(f32ToBf16(v)));
    expect(m.tensors.get(name)!.dtype).toBe('bf16');
    expect(tensorToF32(m.tensors.get(name)!)).toEqual(expected);
  });

  it.each(['q8_0', 'q4_0'] as const)('%s (GGUF) stays quantized, rows un-permuted whole', async (dtype) => {
    const m = await loadModel(await gen(dtype, 'gguf', dtype, SMALL));
    for (const name of [
      'model.layers.0.self_attn.q_proj.weight',
      'model.layers.0.self_attn.k_proj.weight',
      'model.embed_tokens.weight',
    ]) {
      const t = m.tensors.get(name)!;
      expect(t.dtype).toBe(dtype);
      expect(Buffer.compare(t.data, quantize(dtype, generateTensor(m.config, name, t.shape, SEED))), name).toBe(0);
    }
    expect(m.tensors.get('model.norm.weight')!.dtype).toBe('f32');
  });

  it('tied embeddings: no lm_head in either format', async () => {
    const a = await loadModel(await gen('tied', 'hf', 'f32', { ...SMALL, tieWordEmbeddings: true }));
    const b = await loadModel(await gen('tied', 'gguf', 'f32', { ...SMALL, tieWordEmbeddings: true }));
    for (const m of [a, b]) {
      expect(m.config.tieWordEmbeddings).toBe(true);
      expect(m.tensors.has('lm_head.weight')).toBe(false);
    }
  });
});

describe('sharded safetensors', () => {
  async function shard(name: string, breakIt: (index: Record<string, string>) => void = () => {}): Promise<string> {
    const dir = await hfCopy(name);
    const st = readSafetensors(await readFile(join(dir, 'model.safetensors')), 'model.safetensors');
    await rm(join(dir, 'model.safetensors'));
    const all = [...st.tensors.values()];
    const parts = [all.slice(0, 20), all.slice(20)];
    const weightMap: Record<string, string> = {};
    for (const [i, part] of parts.entries()) {
      const file = `model-0000${i + 1}-of-00002.safetensors`;
      await writeFile(join(dir, file), encodeSafetensors(part));
      for (const t of part) weightMap[t.name] = file;
    }
    breakIt(weightMap);
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));
    return dir;
  }

  it('loads the same tensors as the single file', async () => {
    const m = await loadModel(await shard('sharded'));
    expect(m.source.files.map((f) => basename(f))).toEqual([
      'model-00001-of-00002.safetensors',
      'model-00002-of-00002.safetensors',
    ]);
    for (const [name, t] of hf.tensors) expect(Buffer.compare(m.tensors.get(name)!.data, t.data)).toBe(0);
  });

  it('names a missing shard, and a tensor missing from its shard', async () => {
    const dir = await shard('missing-shard', (map) => {
      map['model.norm.weight'] = 'model-00003-of-00003.safetensors';
    });
    const e = await loadError(dir);
    expect(e.file).toBe(join(dir, 'model-00003-of-00003.safetensors'));
    expect(e.message).toContain('missing weight file (listed in model.safetensors.index.json)');
    const dir2 = await shard('misplaced', (map) => {
      map['model.norm.weight'] = 'model-00001-of-00002.safetensors';
    });
    expect((await loadError(dir2)).message).toBe(
      `${join(dir2, 'model-00001-of-00002.safetensors')}: tensor model.norm.weight is listed for this shard in model.safetensors.index.json but missing from it`,
    );
  });
});

describe('bad input is one ModelLoadError naming the file and the problem', () => {
  it('a path that does not exist', async () => {
    expect((await loadError(join(root, 'nope'))).message).toBe(
      `${join(root, 'nope')}: not found: expected a Hugging Face model directory or a .gguf file`,
    );
  });

  it('a directory without config.json', async () => {
    const dir = join(root, 'empty');
    await mkdir(dir);
    expect((await loadError(dir)).file).toBe(join(dir, 'config.json'));
  });

  it('a weight file instead of its directory, and a directory without tokenizer.json', async () => {
    const file = join(root, 'hf', 'model.safetensors');
    expect((await loadError(file)).message).toBe(
      `${file}: is one file of a Hugging Face model: pass the directory that holds it`,
    );
    const dir = await hfCopy('no-tokenizer');
    await rm(join(dir, 'tokenizer.json'));
    expect((await loadError(dir)).message).toBe(
      `${join(dir, 'tokenizer.json')}: file not found: Tessera needs tokenizer.json (tokenizer.model alone is not supported)`,
    );
  });

  it("drops added tokens past the embedding (Gemma 3 1B's <image_soft_token>), refuses a base vocabulary past it", async () => {
    const dir = await hfCopy('added-past-embedding');
    const json = JSON.parse(await readFile(join(dir, 'tokenizer.json'), 'utf8')) as {
      added_tokens: object[];
      model: { vocab: Record<string, number> };
    };
    const special = { single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
    json.added_tokens.push({ ...special, id: 32000, content: '<image_soft_token>' });
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(json));
    const model = await loadModel(dir);
    expect(model.tokenizer.vocabSize).toBe(32000);
    const ids = model.tokenizer.encode('a <image_soft_token>', { addSpecialTokens: false });
    expect(ids.length).toBeGreaterThan(2);
    expect(Math.max(...ids)).toBeLessThan(32000);
    json.model.vocab['▁beyond'] = 32000;
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(json));
    expect((await loadError(dir)).message).toMatch(/the tokenizer has 32001 tokens but the model embeds only 32000/);
  });

  it('a missing weight file', async () => {
    const dir = await hfCopy('no-weights');
    await rm(join(dir, 'model.safetensors'));
    const e = await loadError(dir);
    expect(e.message).toBe(
      `${join(dir, 'model.safetensors')}: missing weight file: expected model.safetensors or model.safetensors.index.json`,
    );
  });

  it('a truncated weight file', async () => {
    const dir = await hfCopy('truncated');
    const bytes = await readFile(join(dir, 'model.safetensors'));
    await writeFile(join(dir, 'model.safetensors'), bytes.subarray(0, bytes.byteLength - 1000));
    const e = await loadError(dir);
    expect(e.file).toBe(join(dir, 'model.safetensors'));
    expect(e.message).toMatch(
      /truncated: tensor lm_head.weight needs data bytes \d+\.\.\d+ but the file holds \d+ bytes of data/,
    );
  });

  it('an unknown architecture', async () => {
    const dir = await hfCopy('unknown-arch');
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    await writeFile(
      join(dir, 'config.json'),
      JSON.stringify({ ...config, model_type: 'gemma2', architectures: ['Gemma2ForCausalLM'] }),
    );
    expect((await loadError(dir)).message).toBe(
      `${join(dir, 'config.json')}: unknown architecture: model_type "gemma2" (Tessera supports llama, ` +
        `mistral, qwen2, qwen3, phi3, gemma3, qwen3moe, glm4moe, glm4)`,
    );
  });

  it('a tensor shape that does not match the config', async () => {
    const dir = await hfCopy('wrong-shape');
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, intermediate_size: 256 }));
    expect((await loadError(dir)).message).toBe(
      `${join(dir, 'model.safetensors')}: tensor model.layers.0.mlp.gate_proj.weight has shape [384, 128] but the config implies [256, 128]`,
    );
  });

  it('a GGUF with a bad magic, a bad version, or cut short', async () => {
    const good = await readFile(join(root, 'tiny.gguf'));
    const cases: [string, Uint8Array, string | RegExp][] = [
      [
        'magic.gguf',
        Buffer.concat([Buffer.from('GGJT'), good.subarray(4)]),
        'not a GGUF file: bad magic "GGJT" (expected "GGUF")',
      ],
      [
        'version.gguf',
        Buffer.concat([good.subarray(0, 4), Buffer.from([9, 0, 0, 0]), good.subarray(8)]),
        'unsupported GGUF version 9',
      ],
      [
        'counts.gguf',
        Buffer.concat([good.subarray(0, 8), Buffer.from([0, 0, 0, 0, 0, 0, 1, 0]), good.subarray(16)]),
        /corrupt header: tensor count at byte 8 is 281474976710656/,
      ],
      ['cut.gguf', good.subarray(0, good.byteLength - 5000), /truncated: tensor output.weight needs bytes/],
      [
        'header-cut.gguf',
        good.subarray(0, 1000),
        'corrupt header: tensor count at byte 8 is 39, which needs at least 1248 bytes, but only 984 follow',
      ],
      [
        'vocab-cut.gguf',
        good.subarray(0, 200_000),
        /corrupt header: item count of tokenizer.ggml.tokens at byte \d+ is 32000/,
      ],
    ];
    for (const [name, bytes, message] of cases) {
      const path = join(root, name);
      await writeFile(path, bytes);
      const e = await loadError(path);
      expect(e.file).toBe(path);
      expect(e.message).toMatch(message);
    }
  });
});

describe('loadModelInfo', () => {
  it('reads config, tokenizer and chat template of a Hugging Face directory without touching its weights', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tessera-info-'));
    try {
      const out = join(dir, 'm');
      await genModel({ preset: 'tiny', format: 'hf', out, seed: 1, overrides: { numLayers: 1 } });
      await writeFile(join(out, 'model.safetensors'), 'not safetensors at all');
      const info = await loadModelInfo(out);
      expect(info.config.numLayers).toBe(1);
      expect(info.tokenizer.encode('Hello', { addSpecialTokens: false }).length).toBeGreaterThan(0);
      expect(info.source.files).toEqual([]);
      expect('tensors' in info).toBe(false);
      // The full load reads the (now corrupt) weights and says so.
      await expect(loadModel(out)).rejects.toThrow(/model\.safetensors/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
