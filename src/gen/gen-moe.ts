// gen-model's mixture-of-experts parts: what a qwen3moe file holds beyond a dense Qwen3's. A
// Hugging Face directory keeps one matrix per expert (mlp.experts.E.{gate,up,down}_proj, as
// Qwen3MoeForCausalLM names them); a GGUF stacks a layer's experts into one 3-D tensor per
// projection (blk.N.ffn_{gate,up,down}_exps, ne = [cols, rows, E]) as llama.cpp's converter does,
// each expert's rows generated under its own HF name so both formats hold the same weights.
// It must never do I/O.
import { ConfigError } from '../core/index.js';
import type { ModelConfig, GgufValue } from '../formats/index.js';
import { gguf } from '../formats/index.js';
import type { GenTensorType } from './gen-mix.js';

/** What gen-model writes per tensor (gen-model.ts's TensorSpec). */
interface Spec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: GenTensorType;
  readonly parts: readonly (readonly [string, readonly number[]])[];
}

/** An expert's matrix, or (gpt-oss) its bias: stacked per layer and projection, [E, rows, cols] or [E, n]. */
const EXPERT = /^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.(weight|bias)$/;
const STACKED = /^model\.layers\.(\d+)\.mlp\.experts\.(gate|up|down)_proj\.(weight|bias)$/;

/** The stacked name of a layer's experts' projection (its GGUF name: ggufExpertName). */
const stackedName = (layer: string, proj: string, kind: string): string =>
  `model.layers.${layer}.mlp.experts.${proj}_proj.${kind}`;

/** Each layer's per-expert specs as three 3-D specs [E, rows, cols] (in the first expert's place). */
export function stackExperts<S extends Spec>(
  config: ModelConfig,
  specs: readonly S[],
  dtypeOf: (name: string, shape: readonly number[]) => GenTensorType,
): Spec[] {
  if (config.moe === null) return [...specs];
  const E = config.moe.numExperts;
  const out: Spec[] = [];
  for (const spec of specs) {
    const m = EXPERT.exec(spec.name);
    if (m === null) {
      out.push(spec);
      continue;
    }
    if (m[2] !== '0') continue; // experts 1.. join expert 0's stack
    const parts = Array.from({ length: E }, (_, e) => {
      const name = `model.layers.${m[1]}.mlp.experts.${e}.${m[3]}_proj.${m[4]}`;
      return [name, spec.shape] as const;
    });
    const name = stackedName(m[1]!, m[3]!, m[4]!);
    const shape = [E, ...spec.shape];
    out.push({ name, shape, dtype: dtypeOf(name, shape), parts });
  }
  return out;
}

/** llama.cpp's name of a stacked expert tensor, or null for any other name. */
export function ggufExpertName(name: string): string | null {
  const m = STACKED.exec(name);
  return m === null ? null : `blk.${m[1]}.ffn_${m[2]}_exps.${m[3]}`;
}

/** qwen3moe.* / glm4moe.* / gpt-oss.* keys (moe-config.ts, gpt-oss-config.ts read them). llama.cpp's qwen3moe renormalises the top-k weights always. */
export function moeGgufMetadata(config: ModelConfig, arch: string): [string, GgufValue][] {
  const moe = config.moe;
  if (moe === null) return [];
  if (config.arch === 'glm4moe')
    return [
      [`${arch}.expert_count`, gguf.u32(moe.numExperts)],
      [`${arch}.expert_used_count`, gguf.u32(moe.numExpertsUsed)],
      [`${arch}.expert_feed_forward_length`, gguf.u32(moe.expertIntermediateSize)],
      [`${arch}.expert_shared_count`, gguf.u32(moe.numSharedExperts ?? 0)],
      [`${arch}.leading_dense_block_count`, gguf.u32(moe.firstDenseLayers ?? 0)],
      [`${arch}.expert_weights_scale`, gguf.f32(moe.routedScalingFactor ?? 1)],
      [`${arch}.expert_weights_norm`, gguf.bool(moe.normTopkProb)],
      [`${arch}.expert_gating_func`, gguf.u32(2)], // sigmoid
      [`${arch}.nextn_predict_layers`, gguf.u32(0)],
    ];
  if (config.arch === 'gpt-oss')
    return [
      [`${arch}.expert_count`, gguf.u32(moe.numExperts)],
      [`${arch}.expert_used_count`, gguf.u32(moe.numExpertsUsed)],
      [`${arch}.expert_feed_forward_length`, gguf.u32(moe.expertIntermediateSize)],
    ];
  if (!moe.normTopkProb)
    throw new ConfigError('qwen3moe: a GGUF is always normalised (llama.cpp); norm_topk_prob false has no GGUF form');
  return [
    [`${arch}.expert_count`, gguf.u32(moe.numExperts)],
    [`${arch}.expert_used_count`, gguf.u32(moe.numExpertsUsed)],
    [`${arch}.expert_feed_forward_length`, gguf.u32(moe.expertIntermediateSize)],
  ];
}

/** Qwen3MoeConfig's fields in config.json (every layer sparse); Glm4MoeConfig's for glm4moe. */
export function moeHfFields(config: ModelConfig): Record<string, unknown> {
  const moe = config.moe;
  if (moe === null) return {};
  if (config.arch === 'glm4moe')
    return {
      n_routed_experts: moe.numExperts,
      num_experts_per_tok: moe.numExpertsUsed,
      moe_intermediate_size: moe.expertIntermediateSize,
      n_shared_experts: moe.numSharedExperts ?? 0,
      first_k_dense_replace: moe.firstDenseLayers ?? 0,
      routed_scaling_factor: moe.routedScalingFactor ?? 1,
      norm_topk_prob: moe.normTopkProb,
      n_group: 1,
      topk_group: 1,
      partial_rotary_factor: (config.ropeDims ?? config.headDim) / config.headDim,
      use_qk_norm: config.qkNorm === true,
      num_nextn_predict_layers: 0,
    };
  return {
    num_experts: moe.numExperts,
    num_experts_per_tok: moe.numExpertsUsed,
    moe_intermediate_size: moe.expertIntermediateSize,
    norm_topk_prob: moe.normTopkProb,
    decoder_sparse_step: 1,
    mlp_only_layers: [],
    output_router_logits: false,
  };
}
