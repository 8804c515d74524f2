// Canonical (Hugging Face) weight names, the shapes a config implies for them, and the mapping
// from GGUF names (llama.cpp's) to canonical ones. The one place that knows which tensors a
// model must have: every loader ends with checkTensors(), so a missing tensor, a wrong shape or
// a tensor Tessera would silently ignore is one ModelLoadError naming the file.
import { InvariantError, ModelLoadError } from '../core/index.js';
import type { HostTensor } from '../kernels/index.js';
import { hasQkNorm, isMoeLayer, type ModelArch, type ModelConfig, type MoeParams } from './config.js';
import { FUSED_QKV, splitFused } from './fused.js';

export const EMBED = 'model.embed_tokens.weight';
export const FINAL_NORM = 'model.norm.weight';
export const LM_HEAD = 'lm_head.weight';

export const layerName = (layer: number, suffix: string): string => `model.layers.${layer}.${suffix}`;

/** Every tensor the config requires, canonical name -> row-major shape [out, in]. */
export function expectedTensors(config: ModelConfig): Map<string, readonly number[]> {
  const { hiddenSize: d, intermediateSize: ff, vocabSize, numHeads, numKvHeads, headDim } = config;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const out = new Map<string, readonly number[]>([[EMBED, [vocabSize, d]]]);
  for (let i = 0; i < config.numLayers; i++) {
    out.set(layerName(i, 'input_layernorm.weight'), [d]);
    out.set(layerName(i, 'self_attn.q_proj.weight'), [qDim, d]);
    out.set(layerName(i, 'self_attn.k_proj.weight'), [kvDim, d]);
    out.set(layerName(i, 'self_attn.v_proj.weight'), [kvDim, d]);
    if (config.attentionBias) {
      out.set(layerName(i, 'self_attn.q_proj.bias'), [qDim]);
      out.set(layerName(i, 'self_attn.k_proj.bias'), [kvDim]);
      out.set(layerName(i, 'self_attn.v_proj.bias'), [kvDim]);
    }
    if (hasQkNorm(config)) {
      out.set(layerName(i, 'self_attn.q_norm.weight'), [headDim]);
      out.set(layerName(i, 'self_attn.k_norm.weight'), [headDim]);
    }
    out.set(layerName(i, 'self_attn.o_proj.weight'), [d, qDim]);
    if (config.gptOss !== undefined) {
      out.set(layerName(i, O_PROJ_BIAS), [d]);
      out.set(layerName(i, ATTENTION_SINKS), [numHeads]);
    }
    // Llama's post_attention_layernorm is the norm before the MLP; Gemma 3's is the norm of the
    // attention output, and pre/post_feedforward_layernorm surround its MLP.
    out.set(layerName(i, 'post_attention_layernorm.weight'), [d]);
    if (config.arch === 'gemma3') {
      out.set(layerName(i, 'pre_feedforward_layernorm.weight'), [d]);
      out.set(layerName(i, 'post_feedforward_layernorm.weight'), [d]);
    }
    if (config.arch === 'glm4') {
      // GLM-4's sandwich: the attention's and the MLP's outputs normalised before the residual add.
      out.set(layerName(i, GLM4_POST_ATTN_NORM), [d]);
      out.set(layerName(i, GLM4_POST_MLP_NORM), [d]);
    }
    if (isMoeLayer(config.moe, i)) {
      for (const [name, shape] of moeLayerTensors(i, d, config.moe)) out.set(name, shape);
      continue;
    }
    out.set(layerName(i, 'mlp.gate_proj.weight'), [ff, d]);
    out.set(layerName(i, 'mlp.up_proj.weight'), [ff, d]);
    out.set(layerName(i, 'mlp.down_proj.weight'), [d, ff]);
  }
  out.set(FINAL_NORM, [d]);
  if (!config.tieWordEmbeddings) out.set(LM_HEAD, [vocabSize, d]);
  return out;
}

/**
 * Router: mlp.gate.weight [E, d] (GLM-4.5: and its selection bias mlp.gate.e_score_correction_bias [E]);
 * expert e: mlp.experts.e.{gate,up}_proj [ffE, d], down_proj [d, ffE]; GLM-4.5's shared experts:
 * mlp.shared_experts.{gate,up,down}_proj of width ffE · n (HF's names).
 */
function moeLayerTensors(layer: number, d: number, moe: MoeParams): [string, readonly number[]][] {
  const ff = moe.expertIntermediateSize;
  const out: [string, readonly number[]][] = [[layerName(layer, 'mlp.gate.weight'), [moe.numExperts, d]]];
  if (moe.gating === 'sigmoid') out.push([layerName(layer, ROUTER_BIAS), [moe.numExperts]]);
  if (moe.expertBias === true) out.push([layerName(layer, ROUTER_LOGIT_BIAS), [moe.numExperts]]);
  for (let e = 0; e < moe.numExperts; e++) {
    out.push([expertName(layer, e, 'gate_proj'), [ff, d]]);
    out.push([expertName(layer, e, 'up_proj'), [ff, d]]);
    out.push([expertName(layer, e, 'down_proj'), [d, ff]]);
    if (moe.expertBias !== true) continue;
    out.push([expertBiasName(layer, e, 'gate_proj'), [ff]]);
    out.push([expertBiasName(layer, e, 'up_proj'), [ff]]);
    out.push([expertBiasName(layer, e, 'down_proj'), [d]]);
  }
  const shared = ff * (moe.numSharedExperts ?? 0);
  if (shared > 0) {
    out.push([sharedExpertName(layer, 'gate_proj'), [shared, d]]);
    out.push([sharedExpertName(layer, 'up_proj'), [shared, d]]);
    out.push([sharedExpertName(layer, 'down_proj'), [d, shared]]);
  }
  return out;
}

export const GLM4_POST_ATTN_NORM = 'post_self_attn_layernorm.weight';
export const GLM4_POST_MLP_NORM = 'post_mlp_layernorm.weight';

/** gpt-oss: o_proj's bias, the per-head attention sinks, the router's bias (added to its logits). */
export const O_PROJ_BIAS = 'self_attn.o_proj.bias';
export const ATTENTION_SINKS = 'self_attn.sinks';
export const ROUTER_LOGIT_BIAS = 'mlp.gate.bias';

/** GLM-4.5's per-expert selection bias (added to the sigmoid scores to choose, not to weigh). */
export const ROUTER_BIAS = 'mlp.gate.e_score_correction_bias';
export const sharedExpertName = (layer: number, proj: ExpertProj): string =>
  layerName(layer, `mlp.shared_experts.${proj}.weight`);

export type ExpertProj = 'gate_proj' | 'up_proj' | 'down_proj';
export const expertName = (layer: number, expert: number, proj: ExpertProj): string =>
  layerName(layer, `mlp.experts.${expert}.${proj}.weight`);

/** gpt-oss: an expert's projection's bias. */
export const expertBiasName = (layer: number, expert: number, proj: ExpertProj): string =>
  layerName(layer, `mlp.experts.${expert}.${proj}.bias`);

/**
 * llama.cpp stores a layer's experts as one 3-D tensor per projection (ne = [cols, rows, E]):
 * blk.N.ffn_{gate,up,down}_exps.weight. Their GGUF name -> the projection, or null.
 */
export const GGUF_EXPERT_PROJ: Readonly<Record<string, ExpertProj>> = {
  'ffn_gate_exps.weight': 'gate_proj',
  'ffn_up_exps.weight': 'up_proj',
  'ffn_down_exps.weight': 'down_proj',
};

/** Tensors some checkpoints carry that a Llama-family forward pass does not need. */
function isIgnorable(name: string, config: ModelConfig): boolean {
  return (
    /\.rotary_emb\.inv_freq$/.test(name) || (config.tieWordEmbeddings && name === LM_HEAD) || isNextnLayer(name, config)
  );
}

/** GLM-4.5's next-token-prediction layers (past numLayers): kept in its files, never run (nor by llama.cpp's graph). */
export function isNextnLayer(name: string, config: ModelConfig): boolean {
  if (config.arch !== 'glm4moe' && config.arch !== 'glm4') return false;
  const m = /^(?:model\.layers|blk)\.(\d+)\./.exec(name);
  return m !== null && Number(m[1]) >= config.numLayers;
}

/**
 * Keep exactly the expected tensors, in canonical order. Throws on a missing tensor, a shape
 * that does not match the config, or an unexpected tensor (which would otherwise be ignored).
 */
export function checkTensors(
  found: ReadonlyMap<string, HostTensor>,
  config: ModelConfig,
  file: string,
  fileOf: ReadonlyMap<string, string> = new Map(),
): Map<string, HostTensor> {
  found = splitFused(found, config, file);
  const expected = expectedTensors(config);
  const out = new Map<string, HostTensor>();
  for (const [name, shape] of expected) {
    const t = found.get(name);
    if (t === undefined)
      throw new ModelLoadError(file, `missing tensor ${name} (shape [${shape.join(', ')}] expected from the config)`);
    if (t.shape.length !== shape.length || t.shape.some((n, i) => n !== shape[i])) {
      throw new ModelLoadError(
        fileOf.get(name) ?? file,
        `tensor ${name} has shape [${t.shape.join(', ')}] but the config implies [${shape.join(', ')}]`,
      );
    }
    out.set(name, t);
  }
  for (const name of found.keys()) {
    if (!expected.has(name) && !isIgnorable(name, config)) {
      throw new ModelLoadError(
        fileOf.get(name) ?? file,
        `unexpected tensor ${name}: not part of a ${config.arch} model with this config`,
      );
    }
  }
  return out;
}

const GGUF_LAYER_SUFFIX: Readonly<Record<string, string>> = {
  'attn_norm.weight': 'input_layernorm.weight',
  'attn_q.weight': 'self_attn.q_proj.weight',
  'attn_k.weight': 'self_attn.k_proj.weight',
  'attn_v.weight': 'self_attn.v_proj.weight',
  'attn_q.bias': 'self_attn.q_proj.bias',
  'attn_k.bias': 'self_attn.k_proj.bias',
  'attn_v.bias': 'self_attn.v_proj.bias',
  'attn_q_norm.weight': 'self_attn.q_norm.weight',
  'attn_k_norm.weight': 'self_attn.k_norm.weight',
  'attn_qkv.weight': FUSED_QKV,
  'attn_output.weight': 'self_attn.o_proj.weight',
  'ffn_norm.weight': 'post_attention_layernorm.weight',
  'ffn_gate.weight': 'mlp.gate_proj.weight',
  'ffn_up.weight': 'mlp.up_proj.weight',
  'ffn_down.weight': 'mlp.down_proj.weight',
  'ffn_gate_inp.weight': 'mlp.gate.weight', // an MoE layer's router
  'exp_probs_b.bias': ROUTER_BIAS, // GLM-4.5's selection bias
  'ffn_gate_shexp.weight': 'mlp.shared_experts.gate_proj.weight',
  'ffn_up_shexp.weight': 'mlp.shared_experts.up_proj.weight',
  'ffn_down_shexp.weight': 'mlp.shared_experts.down_proj.weight',
};
/** GLM-4.5's pre-MLP norm is llama.cpp's attn_post_norm (post_attention_norm), not ffn_norm. */
const GGUF_LAYER_SUFFIX_GLM4MOE: Readonly<Record<string, string>> = Object.fromEntries([
  ...Object.entries(GGUF_LAYER_SUFFIX).filter(([g]) => g !== 'ffn_norm.weight'),
  ['post_attention_norm.weight', 'post_attention_layernorm.weight'],
]);
/** gpt-oss: GLM-4.5's names (post_attention_norm before the MLP), o_proj's bias, the sinks and the router's bias. */
const GGUF_LAYER_SUFFIX_GPT_OSS: Readonly<Record<string, string>> = {
  ...GGUF_LAYER_SUFFIX_GLM4MOE,
  'attn_output.bias': O_PROJ_BIAS,
  'attn_sinks.weight': ATTENTION_SINKS,
  'ffn_gate_inp.bias': ROUTER_LOGIT_BIAS,
};
/** Gemma 3's layer names where llama.cpp's differ from Llama's meaning (ffn_norm is the pre-MLP norm). */
const GGUF_LAYER_SUFFIX_GEMMA3: Readonly<Record<string, string>> = {
  ...GGUF_LAYER_SUFFIX,
  'post_attention_norm.weight': 'post_attention_layernorm.weight',
  'ffn_norm.weight': 'pre_feedforward_layernorm.weight',
  'post_ffw_norm.weight': 'post_feedforward_layernorm.weight',
};
/** GLM-4's sandwich norms (ffn_norm stays the pre-MLP norm). */
const GGUF_LAYER_SUFFIX_GLM4: Readonly<Record<string, string>> = {
  ...GGUF_LAYER_SUFFIX,
  'post_attention_norm.weight': GLM4_POST_ATTN_NORM,
  'post_ffw_norm.weight': GLM4_POST_MLP_NORM,
};
const layerSuffixes = (arch: ModelArch): Readonly<Record<string, string>> =>
  arch === 'gemma3'
    ? GGUF_LAYER_SUFFIX_GEMMA3
    : arch === 'glm4moe'
      ? GGUF_LAYER_SUFFIX_GLM4MOE
      : arch === 'glm4'
        ? GGUF_LAYER_SUFFIX_GLM4
        : arch === 'gpt-oss'
          ? GGUF_LAYER_SUFFIX_GPT_OSS
          : GGUF_LAYER_SUFFIX;
const GGUF_GLOBAL: Readonly<Record<string, string>> = {
  'token_embd.weight': EMBED,
  'output_norm.weight': FINAL_NORM,
  'output.weight': LM_HEAD,
};

/** llama.cpp tensor name -> canonical name; null for names Tessera does not know. */
export function ggufToHfName(name: string, arch: ModelArch = 'llama'): string | null {
  const global = GGUF_GLOBAL[name];
  if (global !== undefined) return global;
  const m = /^blk\.(\d+)\.(.+)$/.exec(name);
  if (m === null) return null;
  const suffix = layerSuffixes(arch)[m[2]!];
  return suffix === undefined ? null : layerName(Number(m[1]), suffix);
}

/** Canonical name -> llama.cpp tensor name. */
export function hfToGgufName(name: string, arch: ModelArch = 'llama'): string {
  for (const [g, hf] of Object.entries(GGUF_GLOBAL)) if (hf === name) return g;
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(name);
  if (m !== null) {
    for (const [g, hf] of Object.entries(layerSuffixes(arch))) if (hf === m[2]) return `blk.${m[1]}.${g}`;
  }
  throw new InvariantError(`no GGUF name for tensor ${name}`);
}
