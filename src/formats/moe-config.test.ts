import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { countParameters, type ModelConfig } from './config.js';
import { modelFingerprint } from '../model/index.js';
import { configFromHf } from './hf-config.js';
import { PRESET_CONFIGS, randomModel } from '../gen/index.js';

const FILE = '/models/q/config.json';

/** Qwen3-30B-A3B's config.json (the fields Tessera reads). */
const qwen3Moe30b = {
  architectures: ['Qwen3MoeForCausalLM'],
  model_type: 'qwen3_moe',
  vocab_size: 151936,
  hidden_size: 2048,
  intermediate_size: 6144,
  moe_intermediate_size: 768,
  num_hidden_layers: 48,
  num_attention_heads: 32,
  num_key_value_heads: 4,
  head_dim: 128,
  num_experts: 128,
  num_experts_per_tok: 8,
  norm_topk_prob: true,
  decoder_sparse_step: 1,
  mlp_only_layers: [],
  max_position_embeddings: 40960,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  rope_scaling: null,
  hidden_act: 'silu',
  tie_word_embeddings: false,
  attention_bias: false,
  use_sliding_window: false,
  bos_token_id: 151643,
  eos_token_id: 151645,
};

function loadError(json: Record<string, unknown>): string {
  try {
    configFromHf(json, FILE);
  } catch (error) {
    expect(error).toBeInstanceOf(ModelLoadError);
    return (error as Error).message;
  }
  throw new Error('expected a ModelLoadError');
}

describe('Qwen3MoeForCausalLM config.json', () => {
  it("reads Qwen3-30B-A3B's routing: 128 experts of 768, 8 per token, normalised; ~30.5B parameters", () => {
    const config = configFromHf(qwen3Moe30b, FILE);
    expect(config.arch).toBe('qwen3moe');
    expect(config.moe).toEqual({
      numExperts: 128,
      numExpertsUsed: 8,
      expertIntermediateSize: 768,
      normTopkProb: true,
    });
    expect(countParameters(config) / 1e9).toBeCloseTo(30.53, 1); // Qwen's model card: 30.5B
  });

  it("takes transformers' default norm_topk_prob (false) when the field is absent", () => {
    const { norm_topk_prob: _, ...rest } = qwen3Moe30b;
    expect(configFromHf(rest, FILE).moe?.normTopkProb).toBe(false);
  });

  it('refuses dense layers among the sparse ones, naming the fields', () => {
    expect(loadError({ ...qwen3Moe30b, decoder_sparse_step: 2 })).toMatch(/decoder_sparse_step 2/);
    expect(loadError({ ...qwen3Moe30b, mlp_only_layers: [0, 47] })).toMatch(/mlp_only_layers \[0, 47\]/);
    expect(loadError({ ...qwen3Moe30b, num_experts_per_tok: 129 })).toMatch(/129 experts per token but only 128/);
    expect(loadError({ ...qwen3Moe30b, num_experts: undefined })).toMatch(/num_experts/);
  });
});

describe('the fingerprint of an MoE model', () => {
  const config: ModelConfig = { ...PRESET_CONFIGS['qwen3moe-tiny'], vocabSize: 64, numLayers: 1 };
  const model = randomModel(config, 1);
  const moe = config.moe!;

  it('covers the routing config: experts per token and renormalisation change it, the weights equal', () => {
    const fp = modelFingerprint(model);
    const others = [
      { ...moe, numExpertsUsed: 3 },
      { ...moe, normTopkProb: false },
    ].map((changed) => modelFingerprint({ ...model, config: { ...config, moe: changed } }));
    expect(new Set([fp, ...others]).size).toBe(3);
  });
});
