// The routing config of a mixture-of-experts model (config.ts's MoeParams) from a Hugging Face
// config.json (Qwen3MoeForCausalLM, Glm4MoeForCausalLM) or GGUF metadata (general.architecture
// "qwen3moe", "glm4moe"; gpt-oss's in gpt-oss-config.ts), and its checks. It must never accept a layout Tessera cannot run: dense layers among the sparse ones
// (decoder_sparse_step > 1, mlp_only_layers), a shared expert, or another gating function are
// ModelLoadErrors naming the file, not silently wrong outputs.
//
// Facts of the formats, as llama.cpp reads and writes them (src/llama-model.cpp, convert_hf_to_gguf.py):
//   - experts:       HF num_experts / num_experts_per_tok / moe_intermediate_size;
//                    GGUF qwen3moe.expert_count / expert_used_count / expert_feed_forward_length.
//   - normalisation: HF norm_topk_prob (transformers' default false; Qwen3-30B-A3B ships true);
//                    llama.cpp's qwen3moe always renormalises the top-k weights (no GGUF key is
//                    read for it): a GGUF qwen3moe is normalised, and gen-model writes only those.
//   - routing:       softmax over every expert's logit, the top k kept (in descending order),
//                    then divided by their sum when normalised. No shared expert.
// GLM-4.5 (glm4moe) adds, as llama.cpp's build_moe_ffn runs it with gating func 2 (sigmoid):
//   - scores = sigmoid(logit); experts chosen by score + e_score_correction_bias (HF
//     mlp.gate.e_score_correction_bias, GGUF blk.N.exp_probs_b.bias), weighted by the unbiased
//     score; normalised (norm_topk_prob / expert_weights_norm), then times routed_scaling_factor
//     (expert_weights_scale);
//   - n_shared_experts (expert_shared_count) always-on experts of width f * n beside the routed ones;
//   - the first first_k_dense_replace (leading_dense_block_count) layers a dense SwiGLU of
//     intermediate_size; n_group > 1 (group-limited routing) is refused.
import { ModelLoadError } from '../core/index.js';
import type { GgufMeta } from './gguf-meta.js';
import type { JsonFields } from './json-fields.js';

/** How a token picks its experts and weighs their outputs. */
export interface MoeParams {
  /** Experts per layer (E). */
  readonly numExperts: number;
  /** Experts each token runs (k, top-k). */
  readonly numExpertsUsed: number;
  /** Each expert's SwiGLU width (its gate/up rows, down columns). */
  readonly expertIntermediateSize: number;
  /** Divide the top-k softmax weights by their sum (Qwen3-MoE's norm_topk_prob). */
  readonly normTopkProb: boolean;
  /**
   * GLM-4.5: sigmoid scores, chosen by score + a per-expert correction bias; gpt-oss: 'softmax-weight'
   * (llama.cpp's SOFTMAX_WEIGHT: the top k by logit, weighted by a softmax over those k alone);
   * absent: softmax over every expert, then the top k (Qwen3-MoE).
   */
  readonly gating?: 'softmax' | 'sigmoid' | 'softmax-weight';
  /** gpt-oss: the router (mlp.gate.bias) and each expert's gate, up and down projections carry a bias; absent: none. */
  readonly expertBias?: boolean;
  /** Multiplier on the (normalised) top-k weights (GLM-4.5's routed_scaling_factor); absent: 1. */
  readonly routedScalingFactor?: number;
  /** Always-on experts of width expertIntermediateSize each, run as one SwiGLU; absent: 0. */
  readonly numSharedExperts?: number;
  /** The first N layers are dense (intermediateSize), the rest routed; absent: 0. */
  readonly firstDenseLayers?: number;
}

/** True when `layer`'s MLP is routed experts (false for a dense model and GLM-4.5's leading dense layers). */
export function isMoeLayer(moe: MoeParams | null, layer: number): moe is MoeParams {
  return moe !== null && layer >= (moe.firstDenseLayers ?? 0);
}

/** Glm4MoeConfig's routing (model_type glm4_moe). */
export function glm4MoeFromHf(f: JsonFields, file: string): MoeParams {
  const groups = f.int('n_group', 1);
  if (groups !== 1)
    throw new ModelLoadError(file, `n_group ${groups}: group-limited routing is not supported (GLM-4.5 ships 1)`);
  return {
    numExperts: f.int('n_routed_experts'),
    numExpertsUsed: f.int('num_experts_per_tok'),
    expertIntermediateSize: f.int('moe_intermediate_size'),
    normTopkProb: f.bool('norm_topk_prob', true),
    gating: 'sigmoid',
    routedScalingFactor: f.num('routed_scaling_factor', 1),
    numSharedExperts: f.int('n_shared_experts', 1),
    firstDenseLayers: f.int('first_k_dense_replace', 1),
  };
}

/** glm4moe.* keys, with llama.cpp's defaults (sigmoid when expert_gating_func is absent). */
export function glm4MoeFromGguf(meta: GgufMeta, key: (k: string) => string, file: string): MoeParams {
  const gating = meta.optInt(key('expert_gating_func')) ?? 2;
  if (gating !== 2) throw new ModelLoadError(file, `${key('expert_gating_func')} ${gating}: glm4moe runs 2 (sigmoid)`);
  const groups = meta.optInt(key('expert_group_count')) ?? 1;
  if (groups > 1)
    throw new ModelLoadError(file, `${key('expert_group_count')} ${groups}: group-limited routing is not supported`);
  const scale = meta.optNum(key('expert_weights_scale')) ?? 0;
  return {
    numExperts: meta.int(key('expert_count')),
    numExpertsUsed: meta.int(key('expert_used_count')),
    expertIntermediateSize: meta.int(key('expert_feed_forward_length')),
    normTopkProb: meta.optBool(key('expert_weights_norm')) ?? false,
    gating: 'sigmoid',
    routedScalingFactor: scale === 0 ? 1 : scale, // llama.cpp: 0 (absent) and 1 both mean no scaling
    numSharedExperts: meta.int(key('expert_shared_count')),
    firstDenseLayers: meta.optInt(key('leading_dense_block_count')) ?? 0,
  };
}

export function moeFromHf(f: JsonFields, file: string): MoeParams {
  const step = f.int('decoder_sparse_step', 1);
  const mlpOnly = f.intList('mlp_only_layers');
  if (step !== 1 || mlpOnly.length > 0) {
    throw new ModelLoadError(
      file,
      `dense layers among the expert layers are not supported (decoder_sparse_step ${step}, mlp_only_layers ` +
        `[${mlpOnly.join(', ')}]; Tessera runs decoder_sparse_step 1 and no mlp_only_layers, as every released Qwen3-MoE and llama.cpp's qwen3moe)`,
    );
  }
  if (f.has('shared_expert_intermediate_size') && f.int('shared_expert_intermediate_size') > 0)
    throw new ModelLoadError(file, 'a shared expert (shared_expert_intermediate_size) is not part of qwen3moe');
  return {
    numExperts: f.int('num_experts'),
    numExpertsUsed: f.int('num_experts_per_tok'),
    expertIntermediateSize: f.int('moe_intermediate_size'),
    normTopkProb: f.bool('norm_topk_prob', false),
  };
}

export function moeFromGguf(meta: GgufMeta, key: (k: string) => string): MoeParams {
  return {
    numExperts: meta.int(key('expert_count')),
    numExpertsUsed: meta.int(key('expert_used_count')),
    expertIntermediateSize: meta.int(key('expert_feed_forward_length')),
    normTopkProb: true,
  };
}

/** Throws one ModelLoadError naming `file` if the routing config cannot run. */
export function validateMoe(moe: MoeParams, file: string): void {
  for (const key of ['numExperts', 'numExpertsUsed', 'expertIntermediateSize'] as const) {
    const value = moe[key];
    if (!Number.isSafeInteger(value) || value <= 0)
      throw new ModelLoadError(file, `moe ${key} must be a positive integer, got ${JSON.stringify(value)}`);
  }
  if (moe.numExpertsUsed > moe.numExperts)
    throw new ModelLoadError(file, `${moe.numExpertsUsed} experts per token but only ${moe.numExperts} experts`);
  for (const key of ['numSharedExperts', 'firstDenseLayers'] as const) {
    const value = moe[key] ?? 0;
    if (!Number.isSafeInteger(value) || value < 0)
      throw new ModelLoadError(file, `moe ${key} must be a non-negative integer, got ${JSON.stringify(value)}`);
  }
  const scale = moe.routedScalingFactor ?? 1;
  if (!(scale > 0 && Number.isFinite(scale)))
    throw new ModelLoadError(file, `moe routedScalingFactor must be > 0, got ${JSON.stringify(scale)}`);
}

/** Parameters of one MoE layer's MLP: the router (and its bias), every expert's and the shared experts' gate, up and down. */
export function moeMlpParameters(hiddenSize: number, moe: MoeParams): number {
  const experts = moe.numExperts + (moe.numSharedExperts ?? 0);
  const bias = moe.gating === 'sigmoid' || moe.expertBias === true ? moe.numExperts : 0;
  const expertBias = moe.expertBias === true ? moe.numExperts * (2 * moe.expertIntermediateSize + hiddenSize) : 0;
  return moe.numExperts * hiddenSize + bias + expertBias + experts * 3 * hiddenSize * moe.expertIntermediateSize;
}
