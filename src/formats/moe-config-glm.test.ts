// GLM-4.5's config.json read as Tessera's ModelConfig (partial RoPE, bias, routing), what is refused,
// the per-head row order that runs partial RoPE on the rotate-half kernels, and its routing rule.
import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { countParameters } from './config.js';
import { configFromHf } from './hf-config.js';
import { routeSigmoidTopK } from '../engine/index.js';
import { partialRopeOrder } from './permute.js';

const FILE = '/models/glm/config.json';

/** GLM-4.5-Air's config.json (the fields Tessera reads). */
const glm45Air = {
  architectures: ['Glm4MoeForCausalLM'],
  model_type: 'glm4_moe',
  attention_bias: true,
  eos_token_id: [151329, 151336, 151338],
  head_dim: 128,
  hidden_act: 'silu',
  hidden_size: 4096,
  partial_rotary_factor: 0.5,
  intermediate_size: 10944,
  max_position_embeddings: 131072,
  moe_intermediate_size: 1408,
  norm_topk_prob: true,
  num_attention_heads: 96,
  n_group: 1,
  topk_group: 1,
  n_routed_experts: 128,
  n_shared_experts: 1,
  routed_scaling_factor: 1.0,
  num_experts_per_tok: 8,
  first_k_dense_replace: 1,
  num_hidden_layers: 46,
  num_key_value_heads: 8,
  num_nextn_predict_layers: 1,
  rms_norm_eps: 1e-5,
  rope_scaling: null,
  rope_theta: 1000000,
  tie_word_embeddings: false,
  use_qk_norm: false,
  vocab_size: 151552,
};

describe('glm4moe config.json', () => {
  it('reads GLM-4.5-Air: half of each head rotates, q/k/v bias, sigmoid routing beside a shared expert, layer 0 dense; ~106B parameters', () => {
    const c = configFromHf(glm45Air, FILE);
    expect([c.arch, c.numLayers, c.headDim, c.ropeDims, c.attentionBias, c.qkNorm]).toEqual([
      'glm4moe',
      46,
      128,
      64,
      true,
      undefined,
    ]);
    expect(c.moe).toEqual({
      numExperts: 128,
      numExpertsUsed: 8,
      expertIntermediateSize: 1408,
      normTopkProb: true,
      gating: 'sigmoid',
      routedScalingFactor: 1,
      numSharedExperts: 1,
      firstDenseLayers: 1,
    });
    const params = countParameters(c); // the next-token-prediction layer is not counted (not run)
    expect(params).toBeGreaterThan(104e9);
    expect(params).toBeLessThan(110e9);
  });

  it('refuses group-limited routing with a ModelLoadError naming the file', () => {
    expect(() => configFromHf({ ...glm45Air, n_group: 8, topk_group: 4 }, FILE)).toThrow(ModelLoadError);
    expect(() => configFromHf({ ...glm45Air, n_group: 8 }, FILE)).toThrow(`${FILE}: n_group 8`);
  });
});

describe('partialRopeOrder', () => {
  it('is a permutation putting rotating pairs at (j, j + headDim/2) and passing dims after them', () => {
    const neox = [...partialRopeOrder(8, 4)];
    expect(neox).toEqual([0, 1, 4, 5, 2, 3, 6, 7]); // pairs (0,2), (1,3) rotate; 4..7 pass
    const interleaved = [...partialRopeOrder(8, 4, true)];
    expect(interleaved).toEqual([0, 2, 4, 5, 1, 3, 6, 7]); // pairs (0,1), (2,3) rotate
    for (const order of [partialRopeOrder(128, 64), partialRopeOrder(128, 64, true), partialRopeOrder(64, 64)])
      expect([...order].sort((a, b) => a - b)).toEqual([...Array(order.length).keys()]);
    expect([...partialRopeOrder(6, 6)]).toEqual([0, 1, 2, 3, 4, 5]); // whole-head NeoX: unchanged
  });
});

describe('routeSigmoidTopK', () => {
  const moe = { numExperts: 4, numExpertsUsed: 2, expertIntermediateSize: 8, normTopkProb: true };
  const sigmoid = (x: number): number => Math.fround(1 / (1 + Math.exp(-x)));
  function route(bias: number[], scale: number, normTopkProb = true): { ids: number[]; weights: number[] } {
    const ids = new Int32Array(2);
    const weights = new Float32Array(2);
    const logits = Float32Array.from([2, 1, 0, -1]);
    const m = { ...moe, normTopkProb, routedScalingFactor: scale };
    routeSigmoidTopK(logits, 1, 4, 2, Float32Array.from(bias), m, new Float32Array(4), ids, weights);
    return { ids: [...ids], weights: [...weights] };
  }

  it('chooses by score + bias, weighs by the unbiased score, normalised then scaled', () => {
    const plain = route([0, 0, 0, 0], 1);
    expect(plain.ids).toEqual([0, 1]);
    const sum = sigmoid(2) + sigmoid(1);
    expect(plain.weights[0]).toBeCloseTo(sigmoid(2) / sum, 6);
    const biased = route([0, 0, 0, 1], 2.5); // expert 3 chosen by its bias, weighed by sigmoid(-1)
    expect(biased.ids).toEqual([3, 0]);
    const total = sigmoid(-1) + sigmoid(2);
    expect(biased.weights[0]).toBeCloseTo((2.5 * sigmoid(-1)) / total, 6);
    expect(route([0, 0, 0, 0], 1, false).weights[1]).toBeCloseTo(sigmoid(1), 6);
  });
});
