import { describe, expect, it } from 'vitest';
import { countParameters, validateConfig, expectedTensors } from '../formats/index.js';
import { tensorDtype, useMoreBits } from './gen-mix.js';
import { checkGenOptions, genConfig } from './gen-model.js';
import { PRESET_CONFIGS } from './presets.js';

const config = validateConfig({ ...PRESET_CONFIGS.m100, numLayers: 8 }, 'test');
const dtypes = (mix: 'q4_k_m' | 'q5_k_m' | 'q6_k'): Record<string, string> =>
  Object.fromEntries(
    [...expectedTensors(config)].map(([name, shape]) => [name, tensorDtype(config, mix, name, shape)]),
  );

describe("gen-model's K-quant mixes follow llama.cpp's llama_tensor_get_type", () => {
  it('use_more_bits picks the first and last eighth and every third layer between (8 layers: 0, 3, 6, 7)', () => {
    expect([...Array(8).keys()].filter((i) => useMoreBits(i, 8))).toEqual([0, 3, 6, 7]);
    expect([...Array(12).keys()].filter((i) => useMoreBits(i, 12))).toEqual([0, 3, 6, 9, 10, 11]);
  });

  it('q4_k_m: Q4_K, with Q6_K for the head and for attn_v / ffn_down of those layers; norms f32', () => {
    const t = dtypes('q4_k_m');
    expect(t['lm_head.weight']).toBe('q6_k');
    expect(t['model.embed_tokens.weight']).toBe('q4_k');
    expect(t['model.norm.weight']).toBe('f32');
    const layer = (i: number) =>
      ['q_proj', 'k_proj', 'v_proj', 'o_proj']
        .map((p) => t[`model.layers.${i}.self_attn.${p}.weight`])
        .concat(['gate_proj', 'up_proj', 'down_proj'].map((p) => t[`model.layers.${i}.mlp.${p}.weight`]));
    expect(layer(0)).toEqual(['q4_k', 'q4_k', 'q6_k', 'q4_k', 'q4_k', 'q4_k', 'q6_k']);
    expect(layer(1)).toEqual(['q4_k', 'q4_k', 'q4_k', 'q4_k', 'q4_k', 'q4_k', 'q4_k']);
    expect(layer(3)).toEqual(layer(0));
    expect(t['model.layers.0.input_layernorm.weight']).toBe('f32');
  });

  it('q5_k_m uses Q5_K as its base, q6_k Q6_K for every matrix', () => {
    expect(dtypes('q5_k_m')['model.layers.1.mlp.up_proj.weight']).toBe('q5_k');
    expect(dtypes('q5_k_m')['model.layers.7.mlp.down_proj.weight']).toBe('q6_k');
    expect(
      new Set(
        Object.entries(dtypes('q6_k'))
          .filter(([n]) => !n.endsWith('norm.weight'))
          .map(([, d]) => d),
      ),
    ).toEqual(new Set(['q6_k']));
  });

  it('falls back to Q8_0 for a matrix whose rows are not whole 256-weight super-blocks', () => {
    expect(tensorDtype(PRESET_CONFIGS.tiny, 'q4_k_m', 'model.layers.0.mlp.down_proj.weight', [128, 384])).toBe('q8_0');
  });

  it("the llama-1b preset (Llama-3.2-1B's shape) has ~1B parameters and no matrix that falls back", () => {
    const big = genConfig({ preset: 'llama-1b' });
    expect(countParameters(big)).toBeGreaterThan(0.95e9);
    expect(countParameters(big)).toBeLessThan(1.1e9);
    const types = new Set([...expectedTensors(big)].map(([name, shape]) => tensorDtype(big, 'q4_k_m', name, shape)));
    expect(types).toEqual(new Set(['f32', 'q4_k', 'q6_k']));
    expect(tensorDtype(big, 'q4_k_m', 'model.embed_tokens.weight', [32000, 2048])).toBe('q6_k'); // tied: it is the head
  });

  it('refuses a K-quant mix for a Hugging Face directory', () => {
    expect(() => checkGenOptions({ preset: 'tiny', format: 'hf', out: '/tmp/x', dtype: 'q4_k_m' })).toThrow(
      /--dtype q4_k_m is not supported with --format hf: safetensors holds f32, f16 or bf16/,
    );
  });
});
