// The normalized model description every other part of Tessera reads: one shape for Llama 2/3,
// TinyLlama, SmolLM, Mistral and Qwen2, whether it came from a Hugging Face config.json
// (hf-config.ts) or GGUF metadata (gguf-config.ts). This file owns the type and its checks;
// it must never read files or guess a value a model did not give (defaults live in the parsers).
import { ModelLoadError } from '../core/index.js';

export const MODEL_ARCHS = ['llama', 'mistral', 'qwen2', 'qwen3', 'phi3'] as const;
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
}

/** Qwen3 RMS-normalizes each head of q and k (q_norm, k_norm over headDim) before RoPE. */
export function hasQkNorm(config: Pick<ModelConfig, 'arch'>): boolean {
  return config.arch === 'qwen3';
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
  return config;
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
  const attention = d * qDim + 2 * d * kvDim + qDim * d + (config.attentionBias ? qDim + 2 * kvDim : 0);
  const mlp = 3 * d * ff;
  const perLayer = attention + mlp + 2 * d;
  return vocabSize * d * (config.tieWordEmbeddings ? 1 : 2) + numLayers * perLayer + d;
}
