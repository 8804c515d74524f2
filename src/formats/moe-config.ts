// The routing config of a mixture-of-experts model (config.ts's MoeParams) from a Hugging Face
// config.json (Qwen3MoeForCausalLM) or GGUF metadata (general.architecture "qwen3moe"), and its
// checks. It must never accept a layout Tessera cannot run: dense layers among the sparse ones
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
}

export function moeFromHf(f: JsonFields, file: string): MoeParams {
  const step = f.int('decoder_sparse_step', 1);
  const mlpOnly = f.intList('mlp_only_layers');
  if (step !== 1 || mlpOnly.length > 0) {
    throw new ModelLoadError(
      file,
      `dense layers among the expert layers are not supported (decoder_sparse_step ${step}, mlp_only_layers [${mlpOnly.join(', ')}]; Tessera runs decoder_sparse_step 1 and no mlp_only_layers, as every released Qwen3-MoE and llama.cpp's qwen3moe)`,
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
}

/** Parameters of one MoE layer's MLP: the router and every expert's gate, up and down. */
export function moeMlpParameters(hiddenSize: number, moe: MoeParams): number {
  return moe.numExperts * hiddenSize + moe.numExperts * 3 * hiddenSize * moe.expertIntermediateSize;
}
