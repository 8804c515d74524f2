// What gpt-oss (GGUF general.architecture "gpt-oss", HF GptOssForCausalLM) adds to a
// Llama-family MoE config, from GGUF metadata, as llama.cpp's llama_model_openai_moe reads it
// and its graph runs it (src/models/openai-moe.cpp, build_moe_ffn), and its checks:
//   - attention sinks: one learned logit per query head (blk.N.attn_sinks.weight, HF self_attn.sinks)
//     in each softmax's max and denominator;
//   - sliding-window layers: attention.sliding_window (128) on the layers the pattern marks:
//     attention.sliding_window_pattern (default 2) with llama.cpp's set_swa_pattern, layer i
//     sliding when i % n < n - 1 (gpt-oss: the even layers; HF layer_types alternate from
//     "sliding_attention");
//   - routing: the top k experts by (biased) router logit, weighted by a softmax over those k
//     (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT), no renormalisation, no scale;
//   - biases: q/k/v/o, the router's, each expert's gate, up and down;
//   - the clamped SwiGLU (LLM_FFN_SWIGLU_OAI_MOE, alpha 1.702, limit 7, fixed in llama.cpp):
//     x = min(gate, limit), y = clamp(up, -limit, limit), out = x · σ(alpha · x) · (y + 1);
//   - the pre-MLP norm is post_attention_norm (as GLM-4.5), YaRN from rope.scaling.* (gguf-config.ts).
// It must never accept a value llama.cpp would not run the same way.
import { ModelLoadError } from '../core/index.js';
import type { GgufMeta } from './gguf-meta.js';
import type { MoeParams } from './moe-config.js';

export interface GptOssParams {
  /** Positions a sliding layer's query sees: p attends to [p - slidingWindow + 1, p]. */
  readonly slidingWindow: number;
  /** One entry per layer: true for a sliding-window layer. */
  readonly slidingLayers: readonly boolean[];
  /** Each layer's self_attn.sinks join its softmax; false: the model has none (a negative control's variant). */
  readonly attentionSinks: boolean;
  /** The SwiGLU's clamp (7 in gpt-oss); null: unclamped. */
  readonly swigluLimit: number | null;
  /** x · σ(alpha · x): 1.702 in gpt-oss. */
  readonly swigluAlpha: number;
}

/** gpt-oss's fixed SwiGLU constants (llama.cpp's build_moe_ffn; HF's GptOssExperts alpha and swiglu_limit). */
export const GPT_OSS_SWIGLU = { alpha: 1.702, limit: 7 } as const;

/** Layer i slides when i % period < period - 1 (llama.cpp's set_swa_pattern, dense last). */
export function slidingLayersFromPattern(numLayers: number, period: number): boolean[] {
  return Array.from({ length: numLayers }, (_, i) => i % period < period - 1);
}

/** gpt-oss.* keys: its attention and activation, and its routing (MoeParams). */
export function gptOssFromGguf(
  meta: GgufMeta,
  key: (k: string) => string,
  numLayers: number,
  file: string,
): { gptOss: GptOssParams; moe: MoeParams } {
  const swaBase = meta.optNum(key('rope.freq_base_swa'));
  if (swaBase !== null && swaBase !== (meta.optNum(key('rope.freq_base')) ?? 10000))
    throw new ModelLoadError(file, `${key('rope.freq_base_swa')} differs from rope.freq_base: not supported`);
  const period = meta.optInt(key('attention.sliding_window_pattern')) ?? 2;
  if (period < 1) throw new ModelLoadError(file, `${key('attention.sliding_window_pattern')} ${period}: must be >= 1`);
  return {
    gptOss: {
      slidingWindow: meta.int(key('attention.sliding_window')),
      slidingLayers: slidingLayersFromPattern(numLayers, period),
      attentionSinks: true,
      swigluLimit: GPT_OSS_SWIGLU.limit,
      swigluAlpha: GPT_OSS_SWIGLU.alpha,
    },
    moe: {
      numExperts: meta.int(key('expert_count')),
      numExpertsUsed: meta.int(key('expert_used_count')),
      expertIntermediateSize: meta.int(key('expert_feed_forward_length')),
      normTopkProb: false,
      gating: 'softmax-weight',
      expertBias: true,
    },
  };
}

export function validateGptOss(g: GptOssParams, numLayers: number, file: string): void {
  if (!(Number.isSafeInteger(g.slidingWindow) && g.slidingWindow > 0))
    throw new ModelLoadError(file, `gpt-oss sliding window must be a positive integer, got ${g.slidingWindow}`);
  if (g.slidingLayers.length !== numLayers)
    throw new ModelLoadError(file, `${g.slidingLayers.length} layer types for ${numLayers} layers`);
  if (g.swigluLimit !== null && !(g.swigluLimit > 0))
    throw new ModelLoadError(file, `gpt-oss swiglu limit must be > 0 or null, got ${g.swigluLimit}`);
  if (!(g.swigluAlpha > 0)) throw new ModelLoadError(file, `gpt-oss swiglu alpha must be > 0, got ${g.swigluAlpha}`);
}
