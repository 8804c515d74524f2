// gen-model's presets and its deterministic random weights. Each tensor draws from its own Rng
// seeded by (seed, canonical name), so a tensor's values do not depend on file format, dtype or
// write order: the HF and GGUF files of one seed hold the same weights before quantization.
//
// The init is chosen so next-token distributions are peaked (logits with a standard deviation
// of LOGIT_STD units; llama-cpp.test.ts measures it and the top-1 margin in llama.cpp): tests
// compare greedy ids with llama.cpp and need argmax to survive float-rounding differences.
// Embeddings are N(0, 1) and every matrix N(0, 1/fan_in), so each sublayer adds about unit RMS
// to the residual stream and attention scores have unit spread: the output depends on context.
// This file must never do I/O.
import { Rng } from '../core/index.js';
import type { ModelConfig } from '../formats/index.js';
import { GEMMA3_VOCAB_SIZE } from './gemma3-vocab.js';
import { GPTOSS_SPECIALS, GPTOSS_VOCAB_SIZE } from './gptoss-vocab.js';
import {
  localLayersFromPattern,
  EMBED,
  GPT_OSS_SWIGLU,
  LM_HEAD,
  slidingLayersFromPattern,
  yarnMscale,
} from '../formats/index.js';

export const GEN_PRESETS = [
  'tiny',
  'm100',
  'qwen3-tiny',
  'phi3-tiny',
  'llama-1b',
  'gemma3-tiny',
  'qwen3moe-tiny',
  'qwen3moe-a3b-2l',
  'glm4moe-tiny',
  'glm4-tiny',
  'gpt-oss-tiny',
  'gpt-oss-20b-2l',
] as const;
export type GenPreset = (typeof GEN_PRESETS)[number];

const LLAMA2_SPECIALS = { bosTokenId: 1, eosTokenIds: [2] } as const;
/** o200k's <|startoftext|>; replies end at <|return|> (and <|call|>: a tool call), as gpt-oss's generation_config. */
const GPTOSS_TOKENS = {
  bosTokenId: GPTOSS_SPECIALS.startOfText,
  eosTokenIds: [GPTOSS_SPECIALS.return, GPTOSS_SPECIALS.call],
} as const;

export const PRESET_CONFIGS: Readonly<Record<GenPreset, ModelConfig>> = {
  /** ~9M parameters, most of them the two 32000-row embeddings; GQA 4 query / 2 KV heads. */
  tiny: {
    arch: 'llama',
    vocabSize: 32000,
    hiddenSize: 128,
    intermediateSize: 384,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 32,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: false,
    ...LLAMA2_SPECIALS,
    gemma3: null,
    moe: null,
  },
  /**
   * ~110M parameters: dim 768, 12 layers, 12 query / 4 KV heads, untied embeddings. (Tied
   * random embeddings make greedy decoding repeat one token: the current token's embedding,
   * still in the residual stream, scores itself highly through the shared matrix.)
   */
  m100: {
    arch: 'llama',
    vocabSize: 32000,
    hiddenSize: 768,
    intermediateSize: 1536,
    numLayers: 12,
    numHeads: 12,
    numKvHeads: 4,
    headDim: 64,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: false,
    ...LLAMA2_SPECIALS,
    gemma3: null,
    moe: null,
  },
  /**
   * Qwen3's shape in miniature: per-head q/k RMSNorm, head dim 64 with 4 heads over a 128-wide
   * residual (q is wider than the model, as in Qwen3-0.6B's 2048 over 1024). Qwen3's real
   * tokenizer and vocabulary size (gen-vocab.ts); <|endoftext|> / <|im_end|> as in Qwen3's config.
   */
  'qwen3-tiny': {
    arch: 'qwen3',
    vocabSize: 151936,
    hiddenSize: 128,
    intermediateSize: 384,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    rmsNormEps: 1e-6,
    ropeTheta: 1000000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: false,
    bosTokenId: 151643,
    eosTokenIds: [151645],
    gemma3: null,
    moe: null,
  },
  /**
   * Llama-3.2-1B's shape (dim 2048, 16 layers, 32 query / 8 KV heads, ff 8192, tied embeddings,
   * RoPE base 500000) over the Llama 2 vocabulary: ~1.0B parameters, for bench:decode.
   */
  'llama-1b': {
    arch: 'llama',
    vocabSize: 32000,
    hiddenSize: 2048,
    intermediateSize: 8192,
    numLayers: 16,
    numHeads: 32,
    numKvHeads: 8,
    headDim: 64,
    rmsNormEps: 1e-5,
    ropeTheta: 500000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 8192,
    slidingWindow: null,
    tieWordEmbeddings: true,
    attentionBias: false,
    ...LLAMA2_SPECIALS,
    gemma3: null,
    moe: null,
  },
  /** Phi-3's shape in miniature: fused qkv and gate_up in its files, full multi-head attention, Llama 2 vocabulary. */
  'phi3-tiny': {
    arch: 'phi3',
    vocabSize: 32000,
    hiddenSize: 128,
    intermediateSize: 384,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 4,
    headDim: 32,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: false,
    ...LLAMA2_SPECIALS,
    gemma3: null,
    moe: null,
  },
  /**
   * Gemma 3's shape in miniature (Gemma-3-1B has 26 layers of 4 query / 1 KV heads of 256 over
   * 1152): 7 layers, local ones with a 16-token window and RoPE base 10000 around a global one
   * (layer 5, every 6th as in Gemma 3) with base 1e6; q/k norms; GELU-tanh; Gemma 3's real
   * tokenizer (262144 pieces plus <image_soft_token>) over Gemma 3 4B's embedding of 262208 rows.
   * query_pre_attn_scalar = head dim, as llama.cpp assumes for every size but 27B. Untied for
   * the reason m100 is (Gemma ties its embeddings; `overrides` can tie them).
   */
  'gemma3-tiny': {
    arch: 'gemma3',
    vocabSize: GEMMA3_VOCAB_SIZE,
    hiddenSize: 64,
    intermediateSize: 256,
    numLayers: 7,
    numHeads: 4,
    numKvHeads: 1,
    headDim: 32,
    rmsNormEps: 1e-6,
    ropeTheta: 1000000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: false,
    bosTokenId: 2,
    eosTokenIds: [1, 106],
    gemma3: {
      slidingWindow: 16,
      localLayers: localLayersFromPattern(7, 6),
      ropeLocalTheta: 10000,
      queryPreAttnScalar: 32,
      finalLogitSoftcap: null,
    },
    moe: null,
  },
  /**
   * Qwen3-MoE in miniature: Qwen3's attention (q/k norms, 4 heads of 64 over a 128-wide residual)
   * and 16 experts of width 256 per layer, 4 per token, normalised. Qwen3's real tokenizer. With
   * `overrides: { hiddenSize: 256 }` every matrix's rows are whole K-quant super-blocks.
   */
  'qwen3moe-tiny': {
    arch: 'qwen3moe',
    vocabSize: 151936,
    hiddenSize: 128,
    intermediateSize: 384,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    rmsNormEps: 1e-6,
    ropeTheta: 1000000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: false,
    bosTokenId: 151643,
    eosTokenIds: [151645],
    gemma3: null,
    moe: { numExperts: 16, numExpertsUsed: 4, expertIntermediateSize: 256, normTopkProb: true },
  },
  /**
   * Qwen3-30B-A3B's layer shape (dim 2048, 32 query / 4 KV heads of 128, 128 experts of width 768,
   * 8 per token, normalised; RoPE base 1e6) with 2 of its 48 layers: ~1.85B parameters, each
   * layer's experts 604M of them (~340 MB at Q4_K), of which a token reads 8/128. For bench:decode
   * (--models qwen3moe-a3b-2l:q4_0; the file takes minutes to generate).
   */
  'qwen3moe-a3b-2l': {
    arch: 'qwen3moe',
    vocabSize: 151936,
    hiddenSize: 2048,
    intermediateSize: 6144,
    numLayers: 2,
    numHeads: 32,
    numKvHeads: 4,
    headDim: 128,
    rmsNormEps: 1e-6,
    ropeTheta: 1000000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 40960,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: false,
    bosTokenId: 151643,
    eosTokenIds: [151645],
    gemma3: null,
    moe: { numExperts: 128, numExpertsUsed: 8, expertIntermediateSize: 768, normTopkProb: true },
  },
  /**
   * GLM-4.5 in miniature: its attention (q/k/v bias, q/k norms as GLM-4.5 355B, partial RoPE on half
   * of each 64-wide head, NeoX pairs), layer 0 a dense SwiGLU and layers 1-3 16 routed experts of
   * width 128, 4 per token by sigmoid score + correction bias, normalised and scaled by 2.5, beside
   * one shared expert. Qwen3's tokenizer stands in for GLM's (gen-model ships no GLM vocabulary).
   */
  'glm4moe-tiny': {
    arch: 'glm4moe',
    vocabSize: 151936,
    hiddenSize: 128,
    intermediateSize: 384,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    rmsNormEps: 1e-5,
    ropeTheta: 1000000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: true,
    bosTokenId: 151643,
    eosTokenIds: [151645],
    gemma3: null,
    moe: {
      numExperts: 16,
      numExpertsUsed: 4,
      expertIntermediateSize: 128,
      normTopkProb: true,
      gating: 'sigmoid',
      routedScalingFactor: 2.5,
      numSharedExperts: 1,
      firstDenseLayers: 1,
    },
    ropeDims: 32,
    qkNorm: true,
  },
  /**
   * GLM-4 (dense, GLM-4-0414) in miniature: q/k/v bias, partial RoPE on half of each 64-wide head in
   * adjacent (interleaved) pairs, sandwich norms (the attention's and the MLP's outputs normalised
   * before the residual add), gate|up fused in its files. Qwen3's tokenizer stands in for GLM's.
   */
  'glm4-tiny': {
    arch: 'glm4',
    vocabSize: 151936,
    hiddenSize: 128,
    intermediateSize: 384,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: true,
    bosTokenId: 151643,
    eosTokenIds: [151645],
    gemma3: null,
    moe: null,
    ropeDims: 32,
  },
  /**
   * gpt-oss in miniature: 4 layers (even ones sliding, window 4: the agreement prompt outgrows it),
   * 4 query / 2 KV heads of 64 over 128, q/k/v/o biases, a sink per head; 16 experts of width 128
   * (as gpt-oss, width = hidden), 4 per token, top 4 by biased logit then a softmax over them, the
   * clamped SwiGLU; YaRN factor 32 over 128 positions, base 150000. o200k and harmony (gptoss-vocab.ts)
   * over gpt-oss's 201088 embedding rows. Expert gate/up weights are drawn 4x wider
   * than the others (initStd) so the clamp at 7 binds, as it does in the trained model.
   */
  'gpt-oss-tiny': {
    arch: 'gpt-oss',
    vocabSize: GPTOSS_VOCAB_SIZE,
    hiddenSize: 128,
    intermediateSize: 128,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    rmsNormEps: 1e-5,
    ropeTheta: 150000,
    ropeScaling: gptOssYarn(128),
    maxPositionEmbeddings: 4096,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: true,
    ...GPTOSS_TOKENS,
    gemma3: null,
    ...gptOss(4, 4, [16, 4, 128]),
  },
  /**
   * gpt-oss-20b's layer shape (dim 2880, 64 query / 8 KV heads of 64, 32 experts of width 2880, 4 per
   * token, window 128, YaRN 32 over 4096, base 150000) with 2 of its 24 layers (one sliding, one
   * full): ~2.52B parameters, each layer's experts 796M of them (~420 MB in MXFP4; a token reads 4/32),
   * 1.16B the two embeddings; o200k and harmony. At 24 layers the same shape counts 20.91B,
   * gpt-oss-20b's published size (gpt-oss-config.test.ts).
   */
  'gpt-oss-20b-2l': {
    arch: 'gpt-oss',
    vocabSize: GPTOSS_VOCAB_SIZE,
    hiddenSize: 2880,
    intermediateSize: 2880,
    numLayers: 2,
    numHeads: 64,
    numKvHeads: 8,
    headDim: 64,
    rmsNormEps: 1e-5,
    ropeTheta: 150000,
    ropeScaling: gptOssYarn(4096),
    maxPositionEmbeddings: 131072,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: true,
    ...GPTOSS_TOKENS,
    gemma3: null,
    ...gptOss(2, 128, [32, 4, 2880]),
  },
};

/**
 * gpt-oss's attention and routing (gpt-oss-config.ts) over `numLayers` layers: sliding window on the
 * even layers, sinks, the clamped SwiGLU; top-k by logit, softmax over the k, biases everywhere.
 */
function gptOss(
  numLayers: number,
  slidingWindow: number,
  experts: [number, number, number],
): Pick<ModelConfig, 'gptOss' | 'moe'> {
  return {
    gptOss: {
      slidingWindow,
      slidingLayers: slidingLayersFromPattern(numLayers, 2),
      attentionSinks: true,
      swigluLimit: GPT_OSS_SWIGLU.limit,
      swigluAlpha: GPT_OSS_SWIGLU.alpha,
    },
    moe: {
      numExperts: experts[0],
      numExpertsUsed: experts[1],
      expertIntermediateSize: experts[2],
      normTopkProb: false,
      gating: 'softmax-weight',
      expertBias: true,
    },
  };
}

/** gpt-oss's YaRN (factor 32 over an original context; llama.cpp's truncated correction range, its attention factor). */
function gptOssYarn(originalMaxPositionEmbeddings: number): ModelConfig['ropeScaling'] {
  return {
    type: 'yarn',
    factor: 32,
    originalMaxPositionEmbeddings,
    betaFast: 32,
    betaSlow: 1,
    attentionFactor: yarnMscale(32),
    mscale: null,
    mscaleAllDim: null,
    truncate: true,
  };
}

/** Standard deviation of the logits at init (in units), before any training. */
export const LOGIT_STD = 8;
/** Norm weights are 1 + NORM_JITTER * N(0, 1): close to 1, but a kernel that ignores them shows. */
const NORM_JITTER = 0.1;

function nameHash(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The standard deviation of a matrix (norms: see NORM_JITTER), by its role. */
function initStd(config: ModelConfig, name: string): number {
  const d = config.hiddenSize;
  const logitScale = LOGIT_STD / Math.sqrt(d);
  // Gemma scales embeddings by sqrt(d): rows of std 1/sqrt(d) enter the residual at unit RMS.
  if (name === EMBED) return config.tieWordEmbeddings ? logitScale : config.arch === 'gemma3' ? 1 / Math.sqrt(d) : 1;
  if (name === LM_HEAD) return logitScale;
  if (name.endsWith('o_proj.weight')) return 1 / Math.sqrt(config.numHeads * config.headDim);
  if (config.gptOss !== undefined && name.includes('.experts.')) {
    // gpt-oss: gate/up 4x wider, so the SwiGLU's clamp at 7 binds; down narrower, so its output stays near unit RMS.
    if (name.endsWith('down_proj.weight')) return 1 / (16 * Math.sqrt(config.moe!.expertIntermediateSize));
    if (name.endsWith('proj.weight')) return 4 / Math.sqrt(d);
  }
  if (name.endsWith('self_attn.sinks')) return 1; // a logit beside unit-spread scores
  if (name.endsWith('down_proj.weight'))
    return 1 / Math.sqrt(name.includes('.experts.') ? config.moe!.expertIntermediateSize : config.intermediateSize);
  if (name.endsWith('.bias')) return 0.1;
  return 1 / Math.sqrt(d);
}

/**
 * The f32 values of one tensor (HF layout and convention: Gemma 3's norm weights w, applied as
 * 1 + w, so jittered around 0), the same for a given (config, name, seed).
 */
export function generateTensor(
  config: ModelConfig,
  name: string,
  shape: readonly number[],
  seed: number,
): Float32Array {
  const rng = new Rng((nameHash(name) ^ Math.imul(seed >>> 0, 0x9e3779b1)) >>> 0);
  const out = new Float32Array(shape.reduce((a, b) => a * b, 1));
  if (shape.length === 1 && name.endsWith('norm.weight')) {
    const center = config.arch === 'gemma3' ? 0 : 1;
    for (let i = 0; i < out.length; i++) out[i] = center + NORM_JITTER * rng.normal();
    return out;
  }
  const std = initStd(config, name);
  for (let i = 0; i < out.length; i++) out[i] = std * rng.normal();
  return out;
}
