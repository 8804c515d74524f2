import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { countParameters } from './config.js';
import { configFromHf } from './hf-config.js';
import { PRESET_CONFIGS } from '../gen/index.js';

const FILE = '/models/x/config.json';

const llama2 = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  vocab_size: 32000,
  hidden_size: 4096,
  intermediate_size: 11008,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  max_position_embeddings: 4096,
  rms_norm_eps: 1e-5,
  bos_token_id: 1,
  eos_token_id: 2,
  hidden_act: 'silu',
  rope_scaling: null,
  tie_word_embeddings: false,
};

function loadError(json: Record<string, unknown>): ModelLoadError {
  try {
    configFromHf(json, FILE);
  } catch (error) {
    expect(error).toBeInstanceOf(ModelLoadError);
    expect((error as ModelLoadError).file).toBe(FILE);
    return error as ModelLoadError;
  }
  throw new Error('expected a ModelLoadError');
}

describe('configFromHf', () => {
  it('reads a Llama 2 config with transformers defaults for absent fields', () => {
    expect(configFromHf(llama2, FILE)).toEqual({
      arch: 'llama',
      vocabSize: 32000,
      hiddenSize: 4096,
      intermediateSize: 11008,
      numLayers: 32,
      numHeads: 32,
      numKvHeads: 32,
      headDim: 128,
      rmsNormEps: 1e-5,
      ropeTheta: 10000,
      ropeScaling: { type: 'none' },
      maxPositionEmbeddings: 4096,
      slidingWindow: null,
      tieWordEmbeddings: false,
      attentionBias: false,
      bosTokenId: 1,
      eosTokenIds: [2],
      gemma3: null,
      moe: null,
    });
  });

  it('reads Llama 3.1: GQA, rope theta, llama3 rope scaling and a list of eos ids', () => {
    const c = configFromHf(
      {
        ...llama2,
        vocab_size: 128256,
        num_key_value_heads: 8,
        rope_theta: 500000,
        max_position_embeddings: 131072,
        bos_token_id: 128000,
        eos_token_id: [128001, 128008, 128009],
        rope_scaling: {
          rope_type: 'llama3',
          factor: 8,
          low_freq_factor: 1,
          high_freq_factor: 4,
          original_max_position_embeddings: 8192,
        },
      },
      FILE,
    );
    expect(c.numKvHeads).toBe(8);
    expect(c.ropeTheta).toBe(500000);
    expect(c.eosTokenIds).toEqual([128001, 128008, 128009]);
    expect(c.ropeScaling).toEqual({
      type: 'llama3',
      factor: 8,
      lowFreqFactor: 1,
      highFreqFactor: 4,
      originalMaxPositionEmbeddings: 8192,
    });
  });

  it('reads TinyLlama / SmolLM shapes: explicit head_dim, tied embeddings', () => {
    const c = configFromHf(
      {
        ...llama2,
        hidden_size: 576,
        num_attention_heads: 9,
        num_key_value_heads: 3,
        tie_word_embeddings: true,
        num_hidden_layers: 30,
      },
      FILE,
    );
    expect([c.headDim, c.numKvHeads, c.tieWordEmbeddings]).toEqual([64, 3, true]);
    const d = configFromHf({ ...llama2, head_dim: 96 }, FILE);
    expect(d.headDim).toBe(96);
  });

  it('reads Mistral (by architectures alone) with its sliding window', () => {
    const { model_type: _dropped, ...rest } = llama2;
    const c = configFromHf(
      { ...rest, architectures: ['MistralForCausalLM'], num_key_value_heads: 8, sliding_window: 4096, rope_theta: 1e6 },
      FILE,
    );
    expect([c.arch, c.slidingWindow, c.ropeTheta]).toEqual(['mistral', 4096, 1e6]);
  });

  it('reads Qwen2 with q/k/v bias, and a sliding window only when use_sliding_window is set', () => {
    const qwen = {
      ...llama2,
      architectures: ['Qwen2ForCausalLM'],
      model_type: 'qwen2',
      sliding_window: 32768,
      use_sliding_window: false,
      rope_theta: 1e6,
    };
    const c = configFromHf(qwen, FILE);
    expect([c.arch, c.attentionBias, c.slidingWindow]).toEqual(['qwen2', true, null]);
    expect(configFromHf({ ...qwen, use_sliding_window: true }, FILE).slidingWindow).toBe(32768);
  });

  it('reads linear, dynamic and yarn rope scaling, in both the old and the new field names', () => {
    expect(configFromHf({ ...llama2, rope_scaling: { type: 'linear', factor: 2 } }, FILE).ropeScaling).toEqual({
      type: 'linear',
      factor: 2,
    });
    expect(configFromHf({ ...llama2, rope_scaling: { type: 'dynamic', factor: 2 } }, FILE).ropeScaling).toEqual({
      type: 'dynamic',
      factor: 2,
      originalMaxPositionEmbeddings: 4096,
    });
    expect(
      configFromHf(
        { ...llama2, rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 32768 } },
        FILE,
      ).ropeScaling,
    ).toEqual({
      type: 'yarn',
      factor: 4,
      originalMaxPositionEmbeddings: 32768,
      betaFast: 32,
      betaSlow: 1,
      attentionFactor: null,
      mscale: null,
      mscaleAllDim: null,
      truncate: true,
    });
    const v5 = configFromHf({ ...llama2, rope_parameters: { rope_type: 'default', rope_theta: 123456 } }, FILE);
    expect([v5.ropeTheta, v5.ropeScaling.type]).toEqual([123456, 'none']);
  });

  it('names the file and the value for an unknown architecture', () => {
    expect(loadError({ ...llama2, model_type: 'gemma2', architectures: ['Gemma2ForCausalLM'] }).message).toBe(
      `${FILE}: unknown architecture: model_type "gemma2" (Tessera supports llama, mistral, qwen2, qwen3, phi3, gemma3, qwen3moe, glm4moe, glm4)`,
    );
    expect(loadError({ ...llama2, model_type: undefined, architectures: ['FalconForCausalLM'] }).message).toContain(
      'architectures ["FalconForCausalLM"]',
    );
    expect(loadError({ vocab_size: 3 }).message).toContain('no model_type or architectures');
  });

  it('rejects missing fields, wrong types, inconsistent shapes and features it cannot run', () => {
    expect(loadError({ ...llama2, hidden_size: undefined }).message).toBe(`${FILE}: missing field "hidden_size"`);
    expect(loadError({ ...llama2, vocab_size: '32000' }).message).toContain(
      'field "vocab_size" must be an integer, got "32000"',
    );
    expect(loadError({ ...llama2, num_key_value_heads: 5 }).message).toContain(
      'numHeads (32) is not a multiple of numKvHeads (5)',
    );
    expect(loadError({ ...llama2, num_attention_heads: 30 }).message).toContain(
      'hidden_size 4096 is not a multiple of num_attention_heads 30',
    );
    expect(loadError({ ...llama2, hidden_act: 'gelu' }).message).toContain('hidden_act "gelu" is not supported');
    expect(loadError({ ...llama2, attention_bias: true }).message).toContain('attention_bias=true');
    expect(loadError({ ...llama2, rope_scaling: { rope_type: 'longrope', factor: 2 } }).message).toContain(
      'rope scaling type "longrope" is not supported',
    );
    expect(loadError({ ...llama2, rope_scaling: { rope_type: 'linear', factor: -1 } }).message).toContain(
      'rope scaling factor must be > 0',
    );
  });
});

describe('countParameters', () => {
  it('counts gen-model presets: tiny a few million, m100 about 110 million', () => {
    expect(countParameters(PRESET_CONFIGS.tiny)).toBe(8_979_584);
    expect(countParameters(PRESET_CONFIGS.m100)).toBe(110_512_896);
  });

  it('counts Llama 2 7B as 6.74 billion', () => {
    expect(countParameters(configFromHf(llama2, FILE))).toBe(6_738_415_616);
  });
});
