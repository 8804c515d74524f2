// The normalized model description every other part of Tessera reads: one shape for Llama 2/3,
// TinyLlama, SmolLM, Mistral, Qwen2/3, Phi-3 and Gemma 3 (its extras in `gemma3`), whether it came from a Hugging Face config.json
// (hf-config.ts) or GGUF metadata (gguf-config.ts); Qwen3-MoE's, GLM-4.5's and gpt-oss's routing in `moe` (moe-config.ts),
// gpt-oss's attention and activation in `gptOss` (gpt-oss-config.ts). This file owns the type and its checks;
// it must never read files or guess a value a model did not give (defaults live in the parsers).
import { ModelLoadError } from '../core/index.js';
import { isMoeLayer, moeMlpParameters, validateMoe, type MoeParams } from './moe-config.js';
import { validateGptOss, type GptOssParams } from './gpt-oss-config.js';

export type { GptOssParams } from './gpt-oss-config.js';

export type { MoeParams } from './moe-config.js';
export { isMoeLayer } from './moe-config.js';

export const MODEL_ARCHS = [
  'llama',
  'mistral',
  'qwen2',
  'qwen3',
  'phi3',
  'gemma3',
  'qwen3moe',
  'glm4moe',
  'glm4',
  'gpt-oss',
] as const;

/** Archs whose MLPs are routed experts (config.moe set). */
export const MOE_ARCHS: readonly ModelArch[] = ['qwen3moe', 'glm4moe', 'gpt-oss'];
export type ModelArch = (typeof MODEL_ARCHS)[number];

/**
 * RoPE frequency scaling, as named by Hugging Face's `rope_scaling.rope_type`.
 * `freq-factors` is GGUF's form of Llama 3 scaling: llama.cpp's converter stores the
 * per-frequency divisors as a `rope_freqs.weight` tensor instead of the four parameters.
 */
export type RopeScaling =
  | { readonly type: 'none' }
  | { readonly type: 'linear'; readonly factor: number }
  | {
      /** Dynamic NTK: the base grows once a sequence passes originalMaxPositionEmbeddings. */
      readonly type: 'dynamic';
      readonly factor: number;
      readonly originalMaxPositionEmbeddings: number;
    }
  | {
      readonly type: 'llama3';
      readonly factor: number;
      readonly lowFreqFactor: number;
      readonly highFreqFactor: number;
      readonly originalMaxPositionEmbeddings: number;
    }
  | {
      readonly type: 'yarn';
      readonly factor: number;
      readonly originalMaxPositionEmbeddings: number;
      readonly betaFast: number;
      readonly betaSlow: number;
      /** Explicit attention factor; null: derived from factor (and mscale) in rope.ts. */
      readonly attentionFactor: number | null;
      readonly mscale: number | null;
      readonly mscaleAllDim: number | null;
      /** Round the correction range to whole dimensions (HF's default). */
      readonly truncate: boolean;
    }
  | { readonly type: 'freq-factors'; readonly factors: readonly number[] };

/**
 * What Gemma 3 adds to a Llama-family layer (see engine/forward/gemma3.ts): local layers attend to a
 * sliding window of the last `slidingWindow` positions (their own included) with their own RoPE
 * base; global layers attend to everything with `ropeTheta` and `ropeScaling`.
 */
export interface Gemma3Params {
  /** Positions a local layer's query sees: p attends to [p - slidingWindow + 1, p]. */
  readonly slidingWindow: number;
  /** One entry per layer: true for a local (sliding-window) layer. */
  readonly localLayers: readonly boolean[];
  /** RoPE base of the local layers (no scaling): HF rope_local_base_freq, GGUF rope.freq_base_swa. */
  readonly ropeLocalTheta: number;
  /** Attention scores are scaled by queryPreAttnScalar^-1/2 (not headDim^-1/2). */
  readonly queryPreAttnScalar: number;
  /** logits = cap * tanh(logits / cap) after lm_head; null: none (Gemma 3 ships none). */
  readonly finalLogitSoftcap: number | null;
}

export interface ModelConfig {
  readonly arch: ModelArch;
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  readonly ropeScaling: RopeScaling;
  /** The model's context length (tokens). */
  readonly maxPositionEmbeddings: number;
  /** Mistral's sliding attention window in tokens; null when every token sees all before it. */
  readonly slidingWindow: number | null;
  /** lm_head shares model.embed_tokens.weight (no lm_head.weight tensor). */
  readonly tieWordEmbeddings: boolean;
  /** q/k/v projections carry a bias (Qwen2). o_proj never does. */
  readonly attentionBias: boolean;
  readonly bosTokenId: number | null;
  /** Every id that ends generation (Llama 3.1 lists several). */
  readonly eosTokenIds: readonly number[];
  /** Gemma 3's local/global layers, attention scale and softcap; null for every other arch. */
  readonly gemma3: Gemma3Params | null;
  /** Mixture-of-experts routing (every layer's MLP is routed experts); null for a dense model. */
  readonly moe: MoeParams | null;
  /**
   * Partial RoPE (GLM-4.5): only the first ropeDims of each head rotate (NeoX pairs i, i + ropeDims/2,
   * base^(-2i/ropeDims)), the rest pass through; absent: the whole head.
   */
  readonly ropeDims?: number;
  /** Per-head RMSNorm of q and k for an arch where it is optional (GLM-4.5's use_qk_norm); absent: the arch decides. */
  readonly qkNorm?: boolean;
  /** gpt-oss's attention sinks, sliding-window layers and clamped SwiGLU; present exactly for arch gpt-oss. */
  readonly gptOss?: GptOssParams;
}

/** Qwen3 (and Qwen3-MoE) and Gemma 3 RMS-normalize each head of q and k (q_norm, k_norm over headDim) before RoPE. */
export function hasQkNorm(config: Pick<ModelConfig, 'arch' | 'qkNorm'>): boolean {
  return config.qkNorm === true || config.arch === 'qwen3' || config.arch === 'qwen3moe' || config.arch === 'gemma3';
}

/** The rotating dimensions of a head: ropeDims when partial, else headDim. */
/** GLM-4 (dense) rotates adjacent pairs (2i, 2i + 1: llama.cpp's NORM rope, HF's interleaved); every other arch rotate-half. */
export function ropeInterleaved(config: Pick<ModelConfig, 'arch'>): boolean {
  return config.arch === 'glm4';
}

export function rotaryDims(config: Pick<ModelConfig, 'headDim' | 'ropeDims'>): number {
  return config.ropeDims ?? config.headDim;
}

/** Throws one ModelLoadError naming `file` if the config is not internally consistent. */
export function validateConfig(config: ModelConfig, file: string): ModelConfig {
  const positive: (keyof ModelConfig)[] = [
    'vocabSize',
    'hiddenSize',
    'intermediateSize',
    'numLayers',
    'numHeads',
    'numKvHeads',
    'headDim',
    'maxPositionEmbeddings',
  ];
  for (const key of positive) {
    const value = config[key];
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      throw new ModelLoadError(file, `${key} must be a positive integer, got ${JSON.stringify(value)}`);
    }
  }
  if (config.numHeads % config.numKvHeads !== 0) {
    throw new ModelLoadError(
      file,
      `numHeads (${config.numHeads}) is not a multiple of numKvHeads (${config.numKvHeads})`,
    );
  }
  if (config.headDim % 2 !== 0) throw new ModelLoadError(file, `headDim must be even for RoPE, got ${config.headDim}`);
  if (!(config.rmsNormEps > 0)) throw new ModelLoadError(file, `rmsNormEps must be > 0, got ${config.rmsNormEps}`);
  if (!(config.ropeTheta > 1)) throw new ModelLoadError(file, `ropeTheta must be > 1, got ${config.ropeTheta}`);
  if (config.slidingWindow !== null && !(Number.isSafeInteger(config.slidingWindow) && config.slidingWindow > 0)) {
    throw new ModelLoadError(file, `slidingWindow must be a positive integer or null, got ${config.slidingWindow}`);
  }
  for (const id of [...config.eosTokenIds, ...(config.bosTokenId === null ? [] : [config.bosTokenId])]) {
    if (!Number.isSafeInteger(id) || id < 0) throw new ModelLoadError(file, `bad special token id ${id}`);
  }
  validateRopeScaling(config.ropeScaling, config.headDim, file);
  validateGemma3(config, file);
  if ((config.moe !== null) !== MOE_ARCHS.includes(config.arch))
    throw new ModelLoadError(
      file,
      `moe parameters must be given exactly for archs ${MOE_ARCHS.join(', ')} (arch ${config.arch})`,
    );
  if (config.moe !== null) validateMoe(config.moe, file);
  if ((config.gptOss !== undefined) !== (config.arch === 'gpt-oss'))
    throw new ModelLoadError(file, `gpt-oss parameters must be given exactly for arch gpt-oss (arch ${config.arch})`);
  if (config.gptOss !== undefined) validateGptOss(config.gptOss, config.numLayers, file);
  const rot = rotaryDims(config);
  if (!(Number.isSafeInteger(rot) && rot > 0 && rot % 2 === 0 && rot <= config.headDim))
    throw new ModelLoadError(file, `rotary dims must be even and within headDim ${config.headDim}, got ${rot}`);
  if (rot !== config.headDim && config.ropeScaling.type !== 'none')
    throw new ModelLoadError(file, 'partial RoPE with RoPE scaling is not supported');
  return config;
}

function validateGemma3(config: ModelConfig, file: string): void {
  const g = config.gemma3;
  if ((g !== null) !== (config.arch === 'gemma3')) {
    throw new ModelLoadError(file, `gemma3 parameters must be given exactly for arch gemma3 (arch ${config.arch})`);
  }
  if (g === null) return;
  if (!(Number.isSafeInteger(g.slidingWindow) && g.slidingWindow > 0))
    throw new ModelLoadError(file, `sliding window must be a positive integer, got ${g.slidingWindow}`);
  if (g.localLayers.length !== config.numLayers)
    throw new ModelLoadError(file, `${g.localLayers.length} layer types for ${config.numLayers} layers`);
  if (!(g.ropeLocalTheta > 1)) throw new ModelLoadError(file, `local RoPE base must be > 1, got ${g.ropeLocalTheta}`);
  if (!(g.queryPreAttnScalar > 0))
    throw new ModelLoadError(file, `query_pre_attn_scalar must be > 0, got ${g.queryPreAttnScalar}`);
  if (g.finalLogitSoftcap !== null && !(g.finalLogitSoftcap > 0))
    throw new ModelLoadError(file, `final logit softcap must be > 0 or null, got ${g.finalLogitSoftcap}`);
  if (config.ropeScaling.type === 'dynamic')
    throw new ModelLoadError(file, 'dynamic RoPE scaling is not supported for gemma3');
}

function validateRopeScaling(scaling: RopeScaling, headDim: number, file: string): void {
  switch (scaling.type) {
    case 'none':
      return;
    case 'linear':
    case 'dynamic':
    case 'llama3':
    case 'yarn':
      if (!(scaling.factor > 0))
        throw new ModelLoadError(file, `rope scaling factor must be > 0, got ${scaling.factor}`);
      if (scaling.type === 'llama3' && !(scaling.highFreqFactor > scaling.lowFreqFactor)) {
        throw new ModelLoadError(file, `llama3 rope scaling needs high_freq_factor > low_freq_factor`);
      }
      return;
    case 'freq-factors':
      if (scaling.factors.length !== headDim / 2) {
        throw new ModelLoadError(
          file,
          `rope_freqs has ${scaling.factors.length} factors, expected headDim/2 = ${headDim / 2}`,
        );
      }
      return;
  }
}

/** Weights in one model: parameters counted from the config (embeddings once when tied). */
export function countParameters(config: ModelConfig): number {
  const { hiddenSize: d, intermediateSize: ff, numHeads, numKvHeads, headDim, vocabSize, numLayers } = config;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const attention =
    d * qDim +
    2 * d * kvDim +
    qDim * d +
    (config.attentionBias ? qDim + 2 * kvDim : 0) +
    (config.gptOss !== undefined ? d + numHeads : 0); // gpt-oss: o_proj's bias and a sink per head
  const norms =
    config.gemma3 !== null
      ? 4 * d + 2 * headDim
      : hasQkNorm(config)
        ? 2 * d + 2 * headDim
        : config.arch === 'glm4'
          ? 4 * d
          : 2 * d;
  let layers = 0;
  for (let i = 0; i < numLayers; i++)
    layers += attention + norms + (isMoeLayer(config.moe, i) ? moeMlpParameters(d, config.moe) : 3 * d * ff);
  return vocabSize * d * (config.tieWordEmbeddings ? 1 : 2) + layers + d;
}
