// The kernel matrix's model files: small Llama GGUFs of any vocabulary size, head tying, RoPE
// base, GQA ratio and hidden size, with per-tensor weight types (one dtype, or a Q4_K_M-style mix
// with one Q5_K tensor as llama-quantize leaves in real files), written here rather than by
// gen-model (whose vocabulary is the whole Llama 2 one and whose weights are all Gaussian).
// `peaked` gives the weights heavy tails and the norms a few large channels, as trained models
// have, so activations carry outliers (where per-32 and per-256 activation quantization differ)
// and the next-token distribution is sharp. Test-only; it writes nothing but `path`.
import { Rng } from '../../src/core/index.js';
import { quantize, type WeightDType } from '../../src/kernels/index.js';
import { GGML_TYPE_OF_DTYPE, type GgufValue } from '../../src/formats/gguf-format.js';
import { gguf, writeGgufFile } from '../../src/formats/gguf-writer.js';
import { ggufVocabFromTokenizerJson, readLlama2Vocab } from '../../src/gen/llama2-vocab.js';
import { useMoreBits } from '../../src/gen/index.js';

export interface MatrixShape {
  readonly name: string;
  readonly vocab: number;
  readonly hidden: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly ff: number;
  readonly layers: number;
  readonly ropeTheta: number;
  readonly tied: boolean;
  readonly peaked: boolean;
}

/** One weight type for every matrix, or 'mix': Q4_K_M's rules plus one Q5_K tensor. */
export type MatrixDType = 'q4_0' | 'q8_0' | 'q4_k' | 'q5_k' | 'q6_k' | 'f16' | 'f32' | 'mix';

/** The weight type of matrix `name` (GGUF name) in layer `layer` (-1: embedding or head). */
export function matrixTensorDtype(shape: MatrixShape, dtype: MatrixDType, name: string, layer: number): WeightDType {
  if (dtype !== 'mix') return dtype;
  if (name === 'output.weight' || (name === 'token_embd.weight' && shape.tied)) return 'q6_k';
  if (/attn_v|ffn_down/.test(name) && layer >= 0 && useMoreBits(layer, shape.layers)) return 'q6_k';
  if (layer === 0 && name.endsWith('attn_output.weight')) return 'q5_k'; // the one Q5_K tensor
  return 'q4_k';
}

/** Writes the model to `path` (a .gguf); the same (shape, dtype, seed) always gives the same bytes. */
export async function writeMatrixGguf(
  path: string,
  shape: MatrixShape,
  dtype: MatrixDType,
  seed: number,
): Promise<void> {
  const s = shape;
  const full = ggufVocabFromTokenizerJson(JSON.parse((await readLlama2Vocab()).tokenizerJsonText), 'tokenizer.json');
  const metadata: [string, GgufValue][] = [
    ['general.architecture', gguf.str('llama')],
    ['general.name', gguf.str(`kernel-matrix-${s.name}`)],
    ['llama.vocab_size', gguf.u32(s.vocab)],
    ['llama.context_length', gguf.u32(2048)],
    ['llama.embedding_length', gguf.u32(s.hidden)],
    ['llama.block_count', gguf.u32(s.layers)],
    ['llama.feed_forward_length', gguf.u32(s.ff)],
    ['llama.rope.dimension_count', gguf.u32(s.headDim)],
    ['llama.attention.key_length', gguf.u32(s.headDim)],
    ['llama.attention.value_length', gguf.u32(s.headDim)],
    ['llama.attention.head_count', gguf.u32(s.heads)],
    ['llama.attention.head_count_kv', gguf.u32(s.kvHeads)],
    ['llama.attention.layer_norm_rms_epsilon', gguf.f32(1e-5)],
    ['llama.rope.freq_base', gguf.f32(s.ropeTheta)],
    // The first `vocab` pieces of Llama 2's vocabulary: specials and all 256 byte pieces included.
    ['tokenizer.ggml.model', gguf.str('llama')],
    ['tokenizer.ggml.tokens', gguf.strings(full.tokens.slice(0, s.vocab))],
    ['tokenizer.ggml.scores', gguf.f32s(full.scores.slice(0, s.vocab))],
    ['tokenizer.ggml.token_type', gguf.i32s(full.tokenTypes.slice(0, s.vocab))],
    ['tokenizer.ggml.bos_token_id', gguf.u32(full.bosTokenId)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(full.eosTokenId)],
    ['tokenizer.ggml.unknown_token_id', gguf.u32(full.unknownTokenId)],
    ['tokenizer.ggml.add_bos_token', gguf.bool(true)],
  ];
  const q = s.heads * s.headDim;
  const kv = s.kvHeads * s.headDim;
  // [name, [rows, cols], layer, std]; 1-D tensors are norms.
  const tensors: [string, number[], number, number][] = [['token_embd.weight', [s.vocab, s.hidden], -1, 1]];
  for (let i = 0; i < s.layers; i++) {
    const b = `blk.${i}`;
    tensors.push(
      [`${b}.attn_norm.weight`, [s.hidden], i, 0],
      [`${b}.attn_q.weight`, [q, s.hidden], i, 1 / Math.sqrt(s.hidden)],
      [`${b}.attn_k.weight`, [kv, s.hidden], i, 1 / Math.sqrt(s.hidden)],
      [`${b}.attn_v.weight`, [kv, s.hidden], i, 1 / Math.sqrt(s.hidden)],
      [`${b}.attn_output.weight`, [s.hidden, q], i, 1 / Math.sqrt(q)],
      [`${b}.ffn_norm.weight`, [s.hidden], i, 0],
      [`${b}.ffn_gate.weight`, [s.ff, s.hidden], i, 1 / Math.sqrt(s.hidden)],
      [`${b}.ffn_up.weight`, [s.ff, s.hidden], i, 1 / Math.sqrt(s.hidden)],
      [`${b}.ffn_down.weight`, [s.hidden, s.ff], i, 1 / Math.sqrt(s.ff)],
    );
  }
  tensors.push(['output_norm.weight', [s.hidden], -1, 0]);
  // Logit scale: a sharp distribution when peaked (top-1 margins of several nats), a flat one not.
  if (!s.tied) tensors.push(['output.weight', [s.vocab, s.hidden], -1, (s.peaked ? 6 : 3) / Math.sqrt(s.hidden)]);
  const specs = tensors.map(([name, dims, layer]) => ({
    name,
    shape: dims,
    ggmlType: GGML_TYPE_OF_DTYPE[dims.length === 1 ? 'f32' : matrixTensorDtype(s, dtype, name, layer)],
  }));
  await writeGgufFile(path, metadata, specs, (i) => {
    const [name, dims, layer, std] = tensors[i]!;
    const rng = new Rng((seed * 7919 + i * 104729) >>> 0);
    const count = dims.reduce((a, b) => a * b, 1);
    const values = new Float32Array(count);
    if (dims.length === 1) {
      // Norms around 1; peaked: 1 channel in 64 at 8-16x (the "massive activations" of real models).
      for (let k = 0; k < count; k++)
        values[k] = 1 + 0.1 * rng.normal() + (s.peaked && k % 64 === 7 ? 7 + 8 * rng.nextFloat() : 0);
      return quantize('f32', values);
    }
    // A tied embedding is the head too: scaled like one.
    const sd = name === 'token_embd.weight' ? (s.tied ? (s.peaked ? 6 : 3) / Math.sqrt(s.hidden) : 1) : std;
    for (let k = 0; k < count; k++) {
      const tail = s.peaked && rng.chance(0.01) ? 5 : 1; // heavy tails: 1% of weights 5x wider
      values[k] = sd * tail * rng.normal();
    }
    return quantize(matrixTensorDtype(s, dtype, name, layer), values);
  });
}
