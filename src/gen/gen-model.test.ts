import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../core/index.js';
import { checkGenOptions, genModel, type GenModelOptions, type GenOverrides, type GenProgress } from './gen-model.js';
import { GgufMeta, readGguf } from '../formats/index.js';
import { PRESET_CONFIGS, generateTensor } from './presets.js';

const SMALL: GenOverrides = { hiddenSize: 64, headDim: 16, intermediateSize: 128, numLayers: 2 };
let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-gen-'));
});
afterAll(async () => rm(root, { recursive: true, force: true }));

describe('generated weights', () => {
  it('depend only on (seed, tensor name): the same seed gives the same values, another seed others', () => {
    const name = 'model.layers.0.self_attn.q_proj.weight';
    const a = generateTensor(PRESET_CONFIGS.tiny, name, [128, 128], 7);
    expect(generateTensor(PRESET_CONFIGS.tiny, name, [128, 128], 7)).toEqual(a);
    expect(generateTensor(PRESET_CONFIGS.tiny, name, [128, 128], 8)).not.toEqual(a);
    expect(generateTensor(PRESET_CONFIGS.tiny, 'model.layers.1.self_attn.q_proj.weight', [128, 128], 7)).not.toEqual(a);
  });

  it('have the intended scales: unit embeddings, 1/sqrt(fan-in) matrices, norms near 1, lm_head for logits of std 8', () => {
    const std = (v: Float32Array): number => Math.sqrt(v.reduce((s, x) => s + x * x, 0) / v.length);
    const mean = (v: Float32Array): number => v.reduce((s, x) => s + x, 0) / v.length;
    const c = PRESET_CONFIGS.tiny;
    expect(std(generateTensor(c, 'model.embed_tokens.weight', [1000, 128], 1))).toBeCloseTo(1, 1);
    expect(std(generateTensor(c, 'model.layers.0.mlp.down_proj.weight', [128, 384], 1)) * Math.sqrt(384)).toBeCloseTo(
      1,
      1,
    );
    expect(std(generateTensor(c, 'lm_head.weight', [1000, 128], 1)) * Math.sqrt(128)).toBeCloseTo(8, 0);
    const norm = generateTensor(c, 'model.norm.weight', [128], 1);
    expect(mean(norm)).toBeCloseTo(1, 1);
    expect(Math.min(...norm)).toBeGreaterThan(0.5);
  });

  it('are written byte-identically by two runs with one seed, with progress up to the total', async () => {
    const progress: GenProgress[] = [];
    const options = (out: string): GenModelOptions => ({
      preset: 'tiny',
      format: 'gguf',
      out,
      seed: 9,
      dtype: 'q8_0',
      overrides: SMALL,
    });
    await genModel({ ...options(join(root, 'a.gguf')), onProgress: (p) => progress.push(p) });
    await genModel(options(join(root, 'b.gguf')));
    expect(Buffer.compare(await readFile(join(root, 'a.gguf')), await readFile(join(root, 'b.gguf')))).toBe(0);
    expect(progress.map((p) => p.doneBytes)).toEqual([...progress.map((p) => p.doneBytes)].sort((x, y) => x - y));
    expect(progress.at(-1)!.doneBytes).toBe(progress.at(-1)!.totalBytes);
    expect(progress.length).toBe(1 + 2 * 9 + 2);
  });
});

describe('the GGUF gen-model writes', () => {
  it('embeds the llama tokenizer, chat template and hyperparameters in the keys llama.cpp reads', async () => {
    const out = join(root, 'meta.gguf');
    const result = await genModel({ preset: 'tiny', format: 'gguf', out, seed: 1, dtype: 'q4_0', overrides: SMALL });
    expect(result.files).toEqual([out]);
    const meta = new GgufMeta(readGguf(await readFile(out), out));
    expect(meta.str('tokenizer.ggml.model')).toBe('llama');
    expect(meta.optStrings('tokenizer.ggml.tokens')!.length).toBe(32000);
    expect(meta.optNumbers('tokenizer.ggml.token_type')!.slice(0, 5)).toEqual([2, 3, 3, 6, 6]);
    expect([
      meta.int('tokenizer.ggml.bos_token_id'),
      meta.int('tokenizer.ggml.eos_token_id'),
      meta.optBool('tokenizer.ggml.add_bos_token'),
    ]).toEqual([1, 2, true]);
    expect(meta.str('tokenizer.chat_template')).toContain('[INST]');
    expect([
      meta.int('general.file_type'),
      meta.int('llama.attention.head_count_kv'),
      meta.int('llama.rope.dimension_count'),
    ]).toEqual([2, 2, 16]);
  });
});

describe('gen-model options', () => {
  const base: GenModelOptions = { preset: 'tiny', format: 'hf', out: '/tmp/x' };
  const configError = (options: GenModelOptions): string => {
    try {
      checkGenOptions(options);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
    throw new Error('expected a ConfigError');
  };

  it('refuse quantized types for hf, a gguf path without .gguf, unknown presets and bad seeds', () => {
    expect(configError({ ...base, dtype: 'q4_0' })).toBe(
      '--dtype q4_0 is not supported with --format hf: safetensors holds f32, f16 or bf16 (use --format gguf for q8_0/q4_0)',
    );
    expect(configError({ ...base, format: 'gguf', out: '/tmp/model' })).toBe(
      '--out must name a .gguf file for --format gguf, got /tmp/model',
    );
    expect(configError({ ...base, preset: 'huge' as never })).toBe(
      'unknown preset "huge" (choose tiny or m100 or qwen3-tiny or phi3-tiny or llama-1b or gemma3-tiny ' +
        'or qwen3moe-tiny or qwen3moe-a3b-2l or glm4moe-tiny or glm4-tiny or gpt-oss-tiny or gpt-oss-20b-2l)',
    );
    expect(configError({ ...base, seed: -1 })).toContain('--seed must be an integer');
    expect(configError({ ...base, preset: 'gpt-oss-tiny' })).toBe(
      "--preset gpt-oss-tiny writes GGUF only (Tessera does not read gpt-oss's HF directory)",
    );
    expect(configError({ ...base, format: 'gguf', out: '/tmp/x.gguf', dtype: 'mxfp4' })).toBe(
      '--dtype mxfp4 quantizes routed experts: choose an MoE preset',
    );
  });

  it('refuse overrides that make an inconsistent model', async () => {
    await expect(genModel({ ...base, out: join(root, 'bad'), overrides: { numKvHeads: 3 } })).rejects.toThrow(
      ConfigError,
    );
    await expect(genModel({ ...base, out: join(root, 'bad'), overrides: { numKvHeads: 3 } })).rejects.toThrow(
      'numHeads (4) is not a multiple of numKvHeads (3)',
    );
    await expect(stat(join(root, 'bad'))).rejects.toThrow();
  });
});
