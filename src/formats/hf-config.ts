// Hugging Face config.json -> ModelConfig, for LlamaForCausalLM (Llama 2/3, TinyLlama, SmolLM),
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM (q/k norms), Phi3ForCausalLM and
// Gemma3ForCausalLM (model_type gemma3_text; its extras in gemma3-config.ts) and
// Qwen3MoeForCausalLM (model_type qwen3_moe; its routing in moe-config.ts) and Glm4MoeForCausalLM
// (model_type glm4_moe: partial RoPE, q/k/v bias, optional q/k norms, leading dense layers; its
// next-token-prediction layers, num_nextn_predict_layers past num_hidden_layers, are not run),
// with transformers' defaults where a field is absent.
// It must never accept a feature it cannot run (another activation, o_proj/MLP bias, other
// RoPE types): those are ModelLoadErrors naming the file, not silently wrong outputs.
import { ModelLoadError } from '../core/index.js';
import { gemma3FromHf, gemma3GlobalRope } from './gemma3-config.js';
import { MODEL_ARCHS, validateConfig, type ModelArch, type ModelConfig, type RopeScaling } from './config.js';
import { JsonFields, type JsonObject } from './json-fields.js';
import { glm4MoeFromHf, moeFromHf } from './moe-config.js';

const ARCH_BY_CLASS: Readonly<Record<string, ModelArch>> = {
  LlamaForCausalLM: 'llama',
  MistralForCausalLM: 'mistral',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
  Phi3ForCausalLM: 'phi3',
  Gemma3ForCausalLM: 'gemma3',
  Qwen3MoeForCausalLM: 'qwen3moe',
  Glm4MoeForCausalLM: 'glm4moe',
  Glm4ForCausalLM: 'glm4',
  GptOssForCausalLM: 'gpt-oss', // refused by configFromHf: GGUF only
};

/** HF model_type values that name an arch by another word. */
const ARCH_BY_MODEL_TYPE: Readonly<Record<string, ModelArch>> = {
  gemma3_text: 'gemma3',
  qwen3_moe: 'qwen3moe',
  glm4_moe: 'glm4moe',
  gpt_oss: 'gpt-oss',
};

/** transformers' default max_position_embeddings per model_type. */
const DEFAULT_CONTEXT: Readonly<Record<ModelArch, number>> = {
  llama: 2048,
  mistral: 131072,
  qwen2: 32768,
  qwen3: 40960,
  phi3: 4096,
  gemma3: 131072,
  qwen3moe: 40960,
  glm4moe: 131072,
  glm4: 131072,
  'gpt-oss': 131072,
};

export function configFromHf(json: JsonObject, file: string): ModelConfig {
  const f = new JsonFields(json, file);
  const arch = hfArch(f, file);
  if (arch === 'gpt-oss')
    throw new ModelLoadError(
      file,
      'gpt-oss is read from GGUF only (its Hugging Face directory, MXFP4 _blocks/_scales, is not)',
    );
  const numHeads = f.int('num_attention_heads');
  const hiddenSize = f.int('hidden_size');
  const act = arch === 'gemma3' ? 'silu' : f.str('hidden_act', 'silu'); // gemma3: gemma3FromHf checks
  if (act !== 'silu') throw new ModelLoadError(file, `hidden_act "${act}" is not supported (Tessera runs silu)`);
  if (f.bool('mlp_bias', false)) throw new ModelLoadError(file, 'mlp_bias=true is not supported');
  const glm = arch === 'glm4moe' || arch === 'glm4';
  const attentionBias = arch === 'qwen2' || (glm && f.bool('attention_bias', arch === 'glm4'));
  if (arch !== 'qwen2' && !glm && f.bool('attention_bias', false)) {
    throw new ModelLoadError(file, 'attention_bias=true (a bias on q/k/v/o) is not supported for llama/mistral');
  }
  const maxPositionEmbeddings = f.int('max_position_embeddings', DEFAULT_CONTEXT[arch]);
  const gemmaRope = arch === 'gemma3' ? gemma3GlobalRope(f) : null;
  const rope = gemmaRope !== null ? gemmaRope.scaling : f.object('rope_parameters');
  const ropeTheta = gemmaRope?.theta ?? (rope?.has('rope_theta') ? rope.num('rope_theta') : f.num('rope_theta', 10000));
  const bos = f.optInt('bos_token_id');
  const numLayers = f.int('num_hidden_layers');
  const headDim = f.has('head_dim')
    ? f.int('head_dim')
    : arch === 'gemma3'
      ? 256
      : glm
        ? 128
        : derivedHeadDim(hiddenSize, numHeads, file);
  const config: ModelConfig = {
    arch,
    vocabSize: f.int('vocab_size'),
    hiddenSize,
    intermediateSize: f.int('intermediate_size'),
    numLayers,
    numHeads,
    numKvHeads: f.int('num_key_value_heads', numHeads),
    headDim,
    rmsNormEps: f.num('rms_norm_eps', 1e-6),
    ropeTheta,
    ropeScaling: ropeScalingFromHf(
      gemmaRope !== null ? rope : (rope ?? f.object('rope_scaling')),
      maxPositionEmbeddings,
      file,
    ),
    maxPositionEmbeddings,
    slidingWindow: slidingWindow(f, arch),
    tieWordEmbeddings: f.bool('tie_word_embeddings', arch === 'gemma3'),
    attentionBias,
    bosTokenId: bos,
    eosTokenIds: f.intList('eos_token_id'),
    gemma3: arch === 'gemma3' ? gemma3FromHf(f, numLayers, headDim, file) : null,
    moe: arch === 'qwen3moe' ? moeFromHf(f, file) : arch === 'glm4moe' ? glm4MoeFromHf(f, file) : null,
    ...(glm ? glm4Attention(f, headDim) : {}),
  };
  return validateConfig(config, file);
}

/** GLM-4.5's partial RoPE (partial_rotary_factor, default 0.5) and optional q/k norms (use_qk_norm). */
function glm4Attention(f: JsonFields, headDim: number): Pick<ModelConfig, 'ropeDims' | 'qkNorm'> {
  const ropeDims = Math.trunc(headDim * f.num('partial_rotary_factor', 0.5));
  return { ...(ropeDims === headDim ? {} : { ropeDims }), ...(f.bool('use_qk_norm', false) ? { qkNorm: true } : {}) };
}

function hfArch(f: JsonFields, file: string): ModelArch {
  const modelType = f.optStr('model_type');
  const classes = f.raw('architectures');
  const firstClass = Array.isArray(classes) && typeof classes[0] === 'string' ? classes[0] : null;
  if (modelType !== null && ARCH_BY_MODEL_TYPE[modelType] !== undefined) return ARCH_BY_MODEL_TYPE[modelType]!;
  if (modelType === 'gemma3')
    throw new ModelLoadError(
      file,
      'model_type "gemma3" is Gemma3ForConditionalGeneration (text and vision): Tessera reads the text-only gemma3_text',
    );
  if (modelType !== null && (MODEL_ARCHS as readonly string[]).includes(modelType)) return modelType as ModelArch;
  if (modelType === null && firstClass !== null && ARCH_BY_CLASS[firstClass] !== undefined)
    return ARCH_BY_CLASS[firstClass]!;
  const seen =
    modelType !== null
      ? `model_type "${modelType}"`
      : firstClass !== null
        ? `architectures ["${firstClass}"]`
        : 'no model_type or architectures';
  const readable = MODEL_ARCHS.filter((a) => a !== 'gpt-oss'); // gpt-oss: GGUF only
  throw new ModelLoadError(file, `unknown architecture: ${seen} (Tessera supports ${readable.join(', ')})`);
}

function derivedHeadDim(hiddenSize: number, numHeads: number, file: string): number {
  if (numHeads <= 0 || hiddenSize % numHeads !== 0) {
    throw new ModelLoadError(
      file,
      `hidden_size ${hiddenSize} is not a multiple of num_attention_heads ${numHeads}, and head_dim is not given`,
    );
  }
  return hiddenSize / numHeads;
}

function slidingWindow(f: JsonFields, arch: ModelArch): number | null {
  switch (arch) {
    case 'llama':
    case 'gemma3': // its window is per layer (Gemma3Params), not a cap on the context
      return null;
    case 'mistral':
    case 'phi3':
      return f.optInt('sliding_window');
    case 'qwen2':
    case 'qwen3':
    case 'qwen3moe':
      return f.bool('use_sliding_window', false) ? f.optInt('sliding_window') : null;
    case 'glm4moe':
    case 'glm4':
    case 'gpt-oss':
      return null;
  }
}

/** `rope_scaling` (or transformers 5's `rope_parameters`) -> RopeScaling. */
export function ropeScalingFromHf(rope: JsonFields | null, maxPositionEmbeddings: number, file: string): RopeScaling {
  if (rope === null) return { type: 'none' };
  const kind = rope.optStr('rope_type') ?? rope.optStr('type') ?? 'default';
  const original = (): number => rope.int('original_max_position_embeddings', maxPositionEmbeddings);
  switch (kind) {
    case 'default':
      return { type: 'none' };
    case 'linear':
      return { type: 'linear', factor: rope.num('factor') };
    case 'dynamic':
      return { type: 'dynamic', factor: rope.num('factor'), originalMaxPositionEmbeddings: original() };
    case 'llama3':
      return {
        type: 'llama3',
        factor: rope.num('factor'),
        lowFreqFactor: rope.num('low_freq_factor'),
        highFreqFactor: rope.num('high_freq_factor'),
        originalMaxPositionEmbeddings: rope.int('original_max_position_embeddings'),
      };
    case 'yarn':
      return {
        type: 'yarn',
        factor: rope.num('factor'),
        originalMaxPositionEmbeddings: original(),
        betaFast: rope.num('beta_fast', 32),
        betaSlow: rope.num('beta_slow', 1),
        attentionFactor: rope.optNum('attention_factor'),
        mscale: rope.optNum('mscale'),
        mscaleAllDim: rope.optNum('mscale_all_dim'),
        truncate: rope.bool('truncate', true),
      };
    default:
      throw new ModelLoadError(
        file,
        `rope scaling type "${kind}" is not supported (supported: linear, dynamic, llama3, yarn)`,
      );
  }
}
