// Gemma 3's config extras (config.ts's Gemma3Params) from a Hugging Face config.json
// (Gemma3ForCausalLM, model_type "gemma3_text") or GGUF metadata (general.architecture "gemma3"),
// and what both formats say about its norms. It must never accept what Tessera cannot run:
// attention-logit softcapping (Gemma 2's, gone in Gemma 3) or another activation is a
// ModelLoadError naming the file.
//
// Facts of the formats, as llama.cpp reads and writes them:
//   - local/global: HF `layer_types` (or `sliding_window_pattern`, every Nth layer global,
//     default 6); GGUF `gemma3.attention.sliding_window` (absent: every layer global) and
//     `gemma3.attention.sliding_window_pattern` (a number, default 6): layer i is local unless
//     i % N == N - 1.
//   - local RoPE base: HF `rope_local_base_freq` or rope_parameters.sliding_attention.rope_theta;
//     GGUF `gemma3.rope.freq_base_swa` (default 10000). Local layers are never RoPE-scaled.
//   - attention scale: HF query_pre_attn_scalar^-1/2; GGUF has no key, llama.cpp uses
//     head_dim^-1/2, or (hidden / heads)^-1/2 for the 62-layer 27B: the same values Google ships.
//   - norms: HF Gemma3RMSNorm multiplies by (1 + weight); llama.cpp's converter writes 1 + weight
//     into the GGUF. Tessera's canonical tensors hold the multiplier, as GGUF does (gemma3NormsFromHf).
import { ModelLoadError } from '../core/index.js';
import type { HostTensor } from '../kernels/index.js';
import type { Gemma3Params, ModelConfig } from './config.js';
import type { GgufMeta } from './gguf-meta.js';
import { tensorToF32 } from './host-tensor.js';
import type { JsonFields } from './json-fields.js';

/** llama.cpp's default period of global layers (every 6th) when a GGUF does not say. */
export const GEMMA3_DEFAULT_PATTERN = 6;
const DEFAULT_LOCAL_THETA = 10000;

/** Layer i is local unless it is the last of each group of `pattern` (HF and llama.cpp agree). */
export function localLayersFromPattern(numLayers: number, pattern: number): boolean[] {
  return Array.from({ length: numLayers }, (_, i) => pattern === 0 || i % pattern < pattern - 1);
}

export function gemma3FromHf(f: JsonFields, numLayers: number, headDim: number, file: string): Gemma3Params {
  const act = f.optStr('hidden_activation') ?? f.str('hidden_act', 'gelu_pytorch_tanh');
  if (act !== 'gelu_pytorch_tanh' && act !== 'gelu_tanh')
    throw new ModelLoadError(
      file,
      `hidden_activation "${act}" is not supported for gemma3 (Tessera runs gelu_pytorch_tanh)`,
    );
  if (f.has('attn_logit_softcapping'))
    throw new ModelLoadError(file, 'attn_logit_softcapping is not supported (Gemma 3 has none; Gemma 2 did)');
  const types = f.raw('layer_types');
  let localLayers: boolean[];
  if (Array.isArray(types)) {
    localLayers = types.map((t) => {
      if (t === 'sliding_attention') return true;
      if (t === 'full_attention') return false;
      throw new ModelLoadError(
        file,
        `layer_types holds ${JSON.stringify(t)} (expected sliding_attention or full_attention)`,
      );
    });
  } else {
    localLayers = localLayersFromPattern(numLayers, f.int('sliding_window_pattern', GEMMA3_DEFAULT_PATTERN));
  }
  const rope = f.object('rope_parameters');
  const local = rope?.object('sliding_attention') ?? null;
  if (local !== null && (local.optStr('rope_type') ?? 'default') !== 'default')
    throw new ModelLoadError(file, 'rope_parameters.sliding_attention: only the default RoPE is supported');
  return {
    slidingWindow: f.int('sliding_window', 4096),
    localLayers,
    ropeLocalTheta: local?.num('rope_theta') ?? f.num('rope_local_base_freq', DEFAULT_LOCAL_THETA),
    queryPreAttnScalar: f.num('query_pre_attn_scalar', headDim),
    finalLogitSoftcap: f.optNum('final_logit_softcapping'),
  };
}

/** HF's global RoPE fields: rope_parameters.full_attention (transformers 5) or the top level. */
export function gemma3GlobalRope(f: JsonFields): { theta: number; scaling: JsonFields | null } {
  const rope = f.object('rope_parameters');
  const full = rope?.object('full_attention') ?? null;
  if (full !== null) return { theta: full.num('rope_theta', 1_000_000), scaling: full };
  return {
    theta: rope?.optNum('rope_theta') ?? f.num('rope_theta', 1_000_000),
    scaling: rope ?? f.object('rope_scaling'),
  };
}

export function gemma3FromGguf(
  meta: GgufMeta,
  key: (k: string) => string,
  shape: Pick<ModelConfig, 'numLayers' | 'hiddenSize' | 'numHeads' | 'headDim'>,
): Gemma3Params {
  const window = meta.optInt(key('attention.sliding_window'));
  const pattern = meta.optInt(key('attention.sliding_window_pattern')) ?? GEMMA3_DEFAULT_PATTERN;
  const hasWindow = window !== null && window > 0;
  return {
    slidingWindow: hasWindow ? window : 1,
    localLayers: hasWindow
      ? localLayersFromPattern(shape.numLayers, pattern)
      : new Array<boolean>(shape.numLayers).fill(false),
    ropeLocalTheta: meta.optNum(key('rope.freq_base_swa')) ?? DEFAULT_LOCAL_THETA,
    queryPreAttnScalar: shape.numLayers === 62 ? shape.hiddenSize / shape.numHeads : shape.headDim,
    finalLogitSoftcap: meta.optNum(key('final_logit_softcapping')),
  };
}

/** Gemma's norm weights are stored as w with the multiplier 1 + w (HF) or as 1 + w (GGUF). */
export function isGemma3Norm(config: Pick<ModelConfig, 'arch'>, name: string): boolean {
  return config.arch === 'gemma3' && name.endsWith('norm.weight');
}

/** f32 1 + w of a norm weight w, as llama.cpp's converter writes it into a GGUF. */
export function gemma3NormMultiplier(w: Float32Array): Float32Array {
  return Float32Array.from(w, (v) => 1 + v);
}

/** An HF directory's tensors with every Gemma 3 norm weight w replaced by its multiplier 1 + w (f32). */
export function gemma3NormsFromHf(config: ModelConfig, tensors: Map<string, HostTensor>): Map<string, HostTensor> {
  if (config.arch !== 'gemma3') return tensors;
  for (const [name, t] of tensors) {
    if (!isGemma3Norm(config, name)) continue;
    const values = gemma3NormMultiplier(tensorToF32(t));
    tensors.set(name, { name, dtype: 'f32', shape: t.shape, data: new Uint8Array(values.buffer) });
  }
  return tensors;
}
