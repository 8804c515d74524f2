// gen-model's weight types per tensor: one dtype for every matrix, or one of llama.cpp's K-quant
// mixes, following llama_tensor_get_type (src/llama-quant.cpp) for a dense Llama:
//   q4_k_m  Q4_K, but Q6_K for output.weight (token_embd when tied), and for attn_v / ffn_down of the layers where
//           use_more_bits(i, n) holds: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2
//   q5_k_m  the same with Q5_K as the base type
//   q6_k    Q6_K everywhere
// 1-D tensors (norms) stay f32, as llama.cpp keeps them, and so does an MoE router (ffn_gate_inp:
// llama.cpp's converter writes it f32 and llama-quantize never quantizes it). An MoE layer's
// stacked experts follow their dense namesakes (ffn_down_exps as ffn_down). A matrix whose row
// (ne[0]) is not a multiple of 256 cannot be a K-quant: llama.cpp then falls back to Q5_0 / Q5_1 / Q8_0, which
// Tessera does not all read; we fall back to Q8_0 for each (a deviation, loud in the header).
//   mxfp4   llama.cpp's MXFP4_MOE (gpt-oss's own GGUF): routed experts' matrices MXFP4, every other
//           matrix Q8_0. Biases and attention sinks (1-D, or an MoE layer's stacked [E, n] biases) stay f32.
// Pure: no I/O.
import type { WeightDType } from '../kernels/index.js';
import { QK_K } from '../kernels/index.js';
import type { ModelConfig } from '../formats/index.js';
import { EMBED, LM_HEAD } from '../formats/index.js';

export const K_MIXES = ['q4_k_m', 'q5_k_m', 'q6_k'] as const;
export type KMix = (typeof K_MIXES)[number];
/** What `gen-model --dtype` accepts. */
export type GenDType = 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q4_0' | KMix | 'mxfp4';
export const GEN_DTYPES: readonly GenDType[] = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0', ...K_MIXES, 'mxfp4'];
/** What one tensor is written as: a WeightDType, or MXFP4 (written only: the loader repacks it, mxfp4.ts). */
export type GenTensorType = WeightDType | 'mxfp4';

/** llama.cpp's general.file_type (LLAMA_FTYPE_MOSTLY_Q4_K_M = 15, Q5_K_M = 17, Q6_K = 18, MXFP4_MOE = 38). */
export const FILE_TYPE_OF_MIX: Readonly<Record<KMix | 'mxfp4', number>> = {
  q4_k_m: 15,
  q5_k_m: 17,
  q6_k: 18,
  mxfp4: 38,
};

export function isKMix(dtype: GenDType): dtype is KMix {
  return (K_MIXES as readonly string[]).includes(dtype);
}

/** A mix of several types (a K-quant mix or MXFP4_MOE): general.file_type from FILE_TYPE_OF_MIX. */
export function isMix(dtype: GenDType): dtype is KMix | 'mxfp4' {
  return dtype === 'mxfp4' || isKMix(dtype);
}

/** llama.cpp's use_more_bits (integer division as in C). */
export function useMoreBits(i: number, n: number): boolean {
  const eighth = Math.trunc(n / 8);
  return i < eighth || i >= Math.trunc((7 * n) / 8) || (i - eighth) % 3 === 2;
}

/** The dtype of tensor `name` (HF name) of `shape` in a file of `dtype`. */
export function tensorDtype(
  config: ModelConfig,
  dtype: GenDType,
  name: string,
  shape: readonly number[],
): GenTensorType {
  if (shape.length === 1 || /\.mlp\.gate\.weight$/.test(name) || name.endsWith('.bias')) return 'f32';
  if (dtype === 'mxfp4') return /\.mlp\.experts\.(\d+\.)?(gate|up|down)_proj\.weight$/.test(name) ? 'mxfp4' : 'q8_0';
  if (!isKMix(dtype)) return dtype;
  if (shape[shape.length - 1]! % QK_K !== 0) return 'q8_0';
  if (dtype === 'q6_k') return 'q6_k';
  const base = dtype === 'q4_k_m' ? 'q4_k' : 'q5_k';
  if (name === LM_HEAD || (name === EMBED && config.tieWordEmbeddings)) return 'q6_k'; // the head, wherever it lives
  const layer = /^model\.layers\.(\d+)\./.exec(name);
  const promoted = /\.(self_attn\.v_proj|mlp\.(experts\.)?down_proj)\.weight$/.test(name);
  if (layer !== null && promoted && useMoreBits(Number(layer[1]), config.numLayers)) return 'q6_k';
  return base;
}
