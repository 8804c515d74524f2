// GGUF metadata -> ModelConfig, for general.architecture "llama" (llama.cpp writes Llama 2/3,
// TinyLlama, SmolLM and Mistral 7B as "llama"), "qwen2", "qwen3", "phi3", "gemma3", "qwen3moe",
// "gpt-oss" (gpt-oss-config.ts) and "glm4moe" (moe-config.ts) / "glm4" (dense;
// partial RoPE from rope.dimension_count, q/k/v bias and q/k norms from their tensors, nextn_predict_layers
// trailing layers not run, as llama.cpp's graph skips them), reading the `<arch>.*` keys with
// llama.cpp's defaults. Llama 3 RoPE scaling arrives as a `rope_freqs.weight` tensor of
// per-frequency divisors. It must never guess an architecture from tensor names.
import { ModelLoadError } from '../core/index.js';
import { dequantize } from '../kernels/index.js';
import { validateConfig, type ModelArch, type ModelConfig, type RopeScaling } from './config.js';
import { gemma3FromGguf } from './gemma3-config.js';
import { dtypeOfGgmlType, ggmlTypeName } from './gguf-format.js';
import { GgufMeta } from './gguf-meta.js';
import { glm4MoeFromGguf, moeFromGguf } from './moe-config.js';
import { gptOssFromGguf } from './gpt-oss-config.js';
import { ggufTensorBytes, type GgufFile } from './gguf-reader.js';
import { yarnMscale } from './rope.js';

const GGUF_ARCHS: Readonly<Record<string, ModelArch>> = {
  llama: 'llama',
  qwen2: 'qwen2',
  qwen3: 'qwen3',
  phi3: 'phi3',
  gemma3: 'gemma3',
  qwen3moe: 'qwen3moe',
  glm4moe: 'glm4moe',
  glm4: 'glm4',
  'gpt-oss': 'gpt-oss',
};

export function ggufArch(g: GgufFile): ModelArch {
  const name = new GgufMeta(g).optStr('general.architecture');
  const arch = name === null ? undefined : GGUF_ARCHS[name];
  if (arch === undefined) {
    const seen = name === null ? 'no general.architecture key' : `general.architecture "${name}"`;
    throw new ModelLoadError(
      g.file,
      `unknown architecture: ${seen} (Tessera reads GGUF llama, qwen2, qwen3, phi3, gemma3, qwen3moe, glm4moe, glm4 and gpt-oss; Mistral 7B GGUFs say "llama")`,
    );
  }
  return arch;
}

export function configFromGguf(g: GgufFile): ModelConfig {
  const meta = new GgufMeta(g);
  const arch = ggufArch(g);
  const key = (k: string): string => `${meta.optStr('general.architecture')}.${k}`;
  const hiddenSize = meta.int(key('embedding_length'));
  const numHeads = meta.int(key('attention.head_count'));
  const headDim = meta.optInt(key('attention.key_length')) ?? hiddenSize / numHeads;
  const ropeDims = meta.optInt(key('rope.dimension_count'));
  const glm = arch === 'glm4moe' || arch === 'glm4';
  const partial = glm && ropeDims !== null && ropeDims < headDim;
  if (ropeDims !== null && ropeDims !== headDim && !partial) {
    throw new ModelLoadError(
      g.file,
      `${key('rope.dimension_count')} = ${ropeDims} but head dim is ${headDim}: partial RoPE is not supported`,
    );
  }
  const embed = g.tensors.find((t) => t.name === 'token_embd.weight');
  if (embed === undefined) throw new ModelLoadError(g.file, 'missing tensor token_embd.weight');
  const maxPositionEmbeddings = meta.int(key('context_length'));
  const eos = ['tokenizer.ggml.eos_token_id', 'tokenizer.ggml.eot_token_id', 'tokenizer.ggml.eom_token_id']
    .map((k) => meta.optInt(k))
    .filter((id): id is number => id !== null);
  const has = (name: string): boolean => g.tensors.some((t) => t.name === name);
  // GLM-4.5's next-token-prediction layers are counted in block_count and not run by llama.cpp's graph.
  const numLayers = meta.int(key('block_count')) - (glm ? (meta.optInt(key('nextn_predict_layers')) ?? 0) : 0);
  const gptOss = arch === 'gpt-oss' ? gptOssFromGguf(meta, key, numLayers, g.file) : null;
  const config: ModelConfig = {
    arch,
    vocabSize: meta.optInt(key('vocab_size')) ?? embed.shape[0]!,
    hiddenSize,
    intermediateSize:
      gptOss === null
        ? meta.int(key('feed_forward_length'))
        : (meta.optInt(key('feed_forward_length')) ?? gptOss.moe.expertIntermediateSize),
    numLayers,
    numHeads,
    numKvHeads: meta.optInt(key('attention.head_count_kv')) ?? numHeads,
    headDim,
    rmsNormEps: meta.num(key('attention.layer_norm_rms_epsilon')),
    ropeTheta: meta.optNum(key('rope.freq_base')) ?? 10000,
    ropeScaling: ggufRopeScaling(g, meta, key, maxPositionEmbeddings),
    maxPositionEmbeddings,
    slidingWindow: null,
    tieWordEmbeddings: !g.tensors.some((t) => t.name === 'output.weight'),
    attentionBias: arch === 'qwen2' || arch === 'gpt-oss' || (glm && has('blk.0.attn_q.bias')),
    bosTokenId: meta.optInt('tokenizer.ggml.bos_token_id'),
    eosTokenIds: [...new Set(eos)],
    gemma3: arch === 'gemma3' ? gemma3FromGguf(meta, key, { numLayers, hiddenSize, numHeads, headDim }) : null,
    moe:
      gptOss !== null
        ? gptOss.moe
        : arch === 'qwen3moe'
          ? moeFromGguf(meta, key)
          : arch === 'glm4moe'
            ? glm4MoeFromGguf(meta, key, g.file)
            : null,
    ...(gptOss !== null ? { gptOss: gptOss.gptOss } : {}),
    ...(partial && ropeDims !== null ? { ropeDims } : {}),
    ...(arch === 'glm4moe' && has('blk.0.attn_q_norm.weight') ? { qkNorm: true } : {}),
  };
  return validateConfig(config, g.file);
}

function ggufRopeScaling(g: GgufFile, meta: GgufMeta, key: (k: string) => string, context: number): RopeScaling {
  const freqs = g.tensors.find((t) => t.name === 'rope_freqs.weight');
  if (freqs !== undefined) {
    const dtype = dtypeOfGgmlType(freqs.ggmlType);
    if (dtype !== 'f32' && dtype !== 'f16')
      throw new ModelLoadError(g.file, `rope_freqs.weight has type ${ggmlTypeName(freqs.ggmlType)}`);
    const n = freqs.shape[0]!;
    const out = new Float32Array(n);
    dequantize(dtype, ggufTensorBytes(g, freqs), 0, n, out);
    return { type: 'freq-factors', factors: [...out] };
  }
  const type = meta.optStr(key('rope.scaling.type')) ?? 'none';
  const factor = meta.optNum(key('rope.scaling.factor')) ?? meta.optNum(key('rope.scale_linear'));
  const original = meta.optInt(key('rope.scaling.original_context_length')) ?? context;
  if (type === 'none' && factor !== null && factor !== 1 && meta.has(key('rope.scale_linear')))
    return { type: 'linear', factor };
  switch (type) {
    case 'none':
      return { type: 'none' };
    case 'linear':
      return factor === null || factor === 1 ? { type: 'none' } : { type: 'linear', factor };
    case 'yarn': {
      if (factor === null)
        throw new ModelLoadError(
          g.file,
          `${key('rope.scaling.type')} is yarn but ${key('rope.scaling.factor')} is missing`,
        );
      // llama.cpp multiplies its attn_factor (default 1) by YaRN's mscale for the factor.
      const attnFactor = meta.optNum(key('rope.scaling.attn_factor')) ?? 1;
      return {
        type: 'yarn',
        factor,
        originalMaxPositionEmbeddings: original,
        betaFast: meta.optNum(key('rope.scaling.yarn_beta_fast')) ?? 32,
        betaSlow: meta.optNum(key('rope.scaling.yarn_beta_slow')) ?? 1,
        attentionFactor: attnFactor * yarnMscale(factor),
        mscale: null,
        mscaleAllDim: null,
        truncate: true,
      };
    }
    default:
      throw new ModelLoadError(g.file, `${key('rope.scaling.type')} "${type}" is not supported (none, linear, yarn)`);
  }
}
