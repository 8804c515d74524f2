import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { configFromHf } from './hf-config.js';

const FILE = '/models/gemma-3-1b/config.json';

/** Gemma-3-1B's config.json as transformers 4.5x writes it (text-only Gemma3ForCausalLM). */
const gemma3_1b = {
  architectures: ['Gemma3ForCausalLM'],
  model_type: 'gemma3_text',
  attention_bias: false,
  attn_logit_softcapping: null,
  bos_token_id: 2,
  eos_token_id: [1, 106],
  final_logit_softcapping: null,
  head_dim: 256,
  hidden_activation: 'gelu_pytorch_tanh',
  hidden_size: 1152,
  intermediate_size: 6912,
  max_position_embeddings: 32768,
  num_attention_heads: 4,
  num_hidden_layers: 26,
  num_key_value_heads: 1,
  query_pre_attn_scalar: 256,
  rms_norm_eps: 1e-6,
  rope_local_base_freq: 10000,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: 512,
  sliding_window_pattern: 6,
  vocab_size: 262144,
};

function loadError(json: Record<string, unknown>): ModelLoadError {
  try {
    configFromHf(json, FILE);
  } catch (error) {
    expect(error).toBeInstanceOf(ModelLoadError);
    return error as ModelLoadError;
  }
  throw new Error('expected a ModelLoadError');
}

describe('configFromHf for Gemma 3', () => {
  it('reads Gemma-3-1B: every 6th layer global, local RoPE base, query_pre_attn_scalar, tied embeddings by default', () => {
    const c = configFromHf(gemma3_1b, FILE);
    expect(c).toMatchObject({
      arch: 'gemma3',
      headDim: 256,
      numKvHeads: 1,
      ropeTheta: 1000000,
      ropeScaling: { type: 'none' },
      slidingWindow: null,
      tieWordEmbeddings: true,
      eosTokenIds: [1, 106],
    });
    expect(c.gemma3).toMatchObject({
      slidingWindow: 512,
      ropeLocalTheta: 10000,
      queryPreAttnScalar: 256,
      finalLogitSoftcap: null,
    });
    expect(c.gemma3!.localLayers.flatMap((local, i) => (local ? [] : [i]))).toEqual([5, 11, 17, 23]);
  });

  it("reads transformers 5's layer_types and rope_parameters (full_attention with linear scaling, sliding_attention)", () => {
    const {
      sliding_window_pattern: _p,
      rope_theta: _t,
      rope_local_base_freq: _l,
      rope_scaling: _s,
      ...rest
    } = gemma3_1b;
    const c = configFromHf(
      {
        ...rest,
        num_hidden_layers: 3,
        layer_types: ['sliding_attention', 'full_attention', 'sliding_attention'],
        rope_parameters: {
          full_attention: { rope_type: 'linear', factor: 8, rope_theta: 1000000 },
          sliding_attention: { rope_type: 'default', rope_theta: 10000 },
        },
        final_logit_softcapping: 30,
      },
      FILE,
    );
    expect(c.gemma3?.localLayers).toEqual([true, false, true]);
    expect(c.ropeTheta).toBe(1000000);
    expect(c.ropeScaling).toEqual({ type: 'linear', factor: 8 });
    expect(c.gemma3?.ropeLocalTheta).toBe(10000);
    expect(c.gemma3?.finalLogitSoftcap).toBe(30);
  });

  it('refuses what it cannot run: attention softcapping, another activation, the vision model', () => {
    expect(loadError({ ...gemma3_1b, attn_logit_softcapping: 50 }).message).toMatch(/attn_logit_softcapping/);
    expect(loadError({ ...gemma3_1b, hidden_activation: 'gelu' }).message).toMatch(/hidden_activation "gelu"/);
    expect(loadError({ ...gemma3_1b, model_type: 'gemma3' }).message).toMatch(/Gemma3ForConditionalGeneration/);
    expect(loadError({ ...gemma3_1b, layer_types: ['sliding_attention'] }).message).toMatch(/1 layer types for 26/);
  });
});
