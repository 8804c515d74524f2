// The model's weights prepared once, at load, for one pair of kernels: every matrix handed to
// DenseKernels.prepare (quantized stays quantized), norm weights and biases widened to f32 in
// memory the op kernels read without a copy (OpKernels.allocF32). It must never run a forward
// pass nor keep a second copy of a matrix on the host beyond the embedding table.
//
// Mapped or read, the file's bytes are the tensors' (model/load.ts, --weights). What prepare
// hands to the kernels is copied into their own layout (native: dense.c's super-blocks and float
// panels; wasm: its memory; ref: a copy), so it is counted as repacked; the embedding's rows are
// read in place, one token at a time, and counted so (`WeightBytes`: the start-up line), as are a
// GGUF's q4_0 / q8_0 / q4_K / q6_K routed-expert stacks on the native kernels (DenseKernels.expertsInPlace,
// kernels/native/experts.c: never copied; PrepareOptions.expertsInPlace false repacks them).
//
// Fusion: the rows of a weight matrix are independent in every dtype (GGML blocks run along a
// row), so q/k/v rows are stacked into one matrix and gate/up rows into another: one dense call
// instead of three (two) per layer, and the input row is read once.
//
//   qkv     [qDim + 2 kvDim, d]   rows: q_proj | k_proj | v_proj
//   gateUp  [2 ff, d]             rows: gate_proj | up_proj (and each expert's, in an MoE layer)
//
// Matrices of one group with different dtypes (llama.cpp's K-quant mixes: Q4_K q/k, Q6_K v) are
// stacked by runs of one dtype, each run prepared on its own (row-stack.ts): none is widened.
import { assert } from '../core/index.js';
import {
  byteSize,
  type DenseKernels,
  type DenseWeight,
  type ExpertsInPlace,
  type HostTensor,
  type OpKernels,
  type WeightDType,
} from '../kernels/index.js';
import {
  hasQkNorm,
  isMoeLayer,
  ropeInterleaved,
  rotaryDims,
  partialRopeOrder,
  permuteHeadRows,
  GLM4_POST_ATTN_NORM,
  GLM4_POST_MLP_NORM,
  ROUTER_BIAS,
  ROUTER_LOGIT_BIAS,
  O_PROJ_BIAS,
  ATTENTION_SINKS,
  expertBiasName,
  sharedExpertName,
  type ModelConfig,
  tensorToF32,
  ropeTable,
  type RopeTable,
  EMBED,
  expertName,
  FINAL_NORM,
  LM_HEAD,
  layerName,
  type ExpertProj,
} from '../formats/index.js';
import { RowStack } from './row-stack.js';

/** What every layer holds: its attention and the norm before its MLP. */
interface AttentionWeights {
  /** [d] */
  readonly inputNorm: Float32Array;
  /** [qDim + 2 kvDim, d] */
  readonly qkv: DenseWeight;
  /** [qDim + 2 kvDim], or null when the model has no attention bias (all but Qwen2). */
  readonly qkvBias: Float32Array | null;
  /** [headDim] each: Qwen3's and Gemma 3's per-head RMSNorm of q and k before RoPE; null for other archs. */
  readonly qNorm: Float32Array | null;
  readonly kNorm: Float32Array | null;
  /** [d, qDim] */
  readonly o: DenseWeight;
  /** [d]: gpt-oss's o_proj bias; null for other archs. */
  readonly oBias: Float32Array | null;
  /** [numHeads]: gpt-oss's attention sinks (one logit per head in the softmax); null for other archs. */
  readonly sinks: Float32Array | null;
  /** [d]: the norm before the MLP; Gemma 3's of the attention output (its post_attention_layernorm). */
  readonly postNorm: Float32Array;
}

/** A layer whose MLP is one SwiGLU (GELU for Gemma 3) over every token. */
export interface DenseLayerWeights extends AttentionWeights {
  /** [d] each: Gemma 3's norms before and after the MLP (GLM-4: after); null for other archs. */
  readonly preFfnNorm: Float32Array | null;
  readonly postFfnNorm: Float32Array | null;
  /** [d]: GLM-4's norm of the attention output before the residual add; null for other archs. */
  readonly attnPostNorm: Float32Array | null;
  /** [2 ff, d] */
  readonly gateUp: DenseWeight;
  /** [d, ff] */
  readonly down: DenseWeight;
  readonly moe: null;
}

/** A layer whose MLP is routed experts (forward/moe.ts). */
export interface MoeLayerWeights extends AttentionWeights {
  readonly moe: MoeFfnWeights;
}

export type LayerWeights = DenseLayerWeights | MoeLayerWeights;

/** One expert's SwiGLU: gate | up stacked [2 ffE, d] (as a dense layer's gateUp), down [d, ffE]. */
export interface ExpertWeights {
  readonly gateUp: DenseWeight;
  readonly down: DenseWeight;
  /** gpt-oss: [2 ffE] gate | up biases and [d] down's; null for other archs. */
  readonly gateUpBias: Float32Array | null;
  readonly downBias: Float32Array | null;
}

export interface MoeFfnWeights {
  /** [E, d]: router logits (mlp.gate; f32 in every GGUF). */
  readonly router: DenseWeight;
  /** [E]: GLM-4.5's selection bias (sigmoid routing); null for softmax routing. */
  readonly scoreBias: Float32Array | null;
  /** [E]: gpt-oss's router bias, added to the logits; null for other archs. */
  readonly routerBias: Float32Array | null;
  /** GLM-4.5's shared experts, one SwiGLU of width ffE · n every token runs; null when none. */
  readonly shared: ExpertWeights | null;
  /** E of them, prepared each on its own: a step runs only the ones its tokens chose; none when `inPlace`. */
  readonly experts: readonly ExpertWeights[];
  /** The E experts read where they lie in the file (DenseKernels.expertsInPlace); null: `experts` run them. */
  readonly inPlace: ExpertsInPlace | null;
}

export interface PreparedWeights {
  /** Gemma 3's local layers' RoPE (base ropeLocalTheta, unscaled), built once; null for other archs. */
  readonly ropeLocal: RopeTable | null;
  /** [vocab, d], as in the file: rows are decoded one token at a time. */
  readonly embed: HostTensor;
  readonly layers: readonly LayerWeights[];
  /** [d] */
  readonly finalNorm: Float32Array;
  /** [vocab, d]: lm_head.weight, or the embedding when tied. */
  readonly lmHead: DenseWeight;
  /** Bytes of weights one token's forward pass reads (all matrices but the embedding). */
  readonly bytesPerToken: number;
  /** The file's bytes this preparation copied into the kernels' memory, and those it reads in place. */
  readonly bytes: WeightBytes;
}

/**
 * Of a model's tensor bytes (in the file, mapped or read): `repacked`, handed to the kernels'
 * prepare (copied into their own layout) or widened to f32 (norms, biases); `inPlace`, read
 * where they lie while serving (the embedding; a tied one is also repacked as the LM head; routed
 * experts the dense kernels read in their file layout).
 */
export interface WeightBytes {
  readonly repacked: number;
  readonly inPlace: number;
}

export interface PrepareOptions {
  /**
   * Routed experts whose file layout the dense kernels read (a GGUF's q4_0 / q8_0 / q4_K / q6_K expert stacks on
   * the native kernels) are used in place, not repacked (default true; false: every expert
   * repacked, as before experts.c: the A/B of bench:decode --experts-ab).
   */
  readonly expertsInPlace?: boolean;
}

export async function prepareWeights(
  config: ModelConfig,
  tensors: ReadonlyMap<string, HostTensor>,
  dense: DenseKernels,
  ops: OpKernels,
  options: PrepareOptions = {},
): Promise<PreparedWeights> {
  // Partial RoPE: q/k rows (and biases, norms) in the order the rotate-half kernels rotate (permute.ts).
  const interleaved = ropeInterleaved(config);
  const ropeOrder =
    rotaryDims(config) === config.headDim && !interleaved
      ? null
      : partialRopeOrder(config.headDim, rotaryDims(config), interleaved);
  const get = (name: string): HostTensor => {
    const t = tensors.get(name);
    assert(t !== undefined, () => `prepareWeights: tensor ${name} is missing (loadModel checks every tensor)`);
    if (ropeOrder === null) return t;
    const head = /\.self_attn\.(?:([qk])_proj\.(?:weight|bias)|[qk]_norm\.weight)$/.exec(name);
    if (head === null) return t;
    const heads = head[1] === 'q' ? config.numHeads : head[1] === 'k' ? config.numKvHeads : 1; // a norm: one head
    return permuteHeadRows(t, heads, ropeOrder);
  };
  let repacked = 0;
  let inPlaceBytes = 0;
  const vector = (name: string): Float32Array => {
    const t = get(name);
    repacked += t.data.byteLength;
    const values = tensorToF32(t);
    const out = ops.allocF32(values.length);
    out.set(values);
    return out;
  };
  /** Vectors end to end in one f32 buffer the op kernels read (gpt-oss's gate | up biases). */
  const vectors = (names: readonly string[]): Float32Array => {
    const parts = names.map((name) => tensorToF32(get(name)));
    const out = ops.allocF32(parts.reduce((a, p) => a + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  };
  let bytesPerToken = 0;
  // One buffer reused for every stack of one dtype: prepare copies (repacks) what it is given, so
  // a stack is garbage as soon as prepare returns; a fresh one per expert left GBs for the GC
  // (Qwen3-30B-A3B's shape: 4.3 GB of anonymous memory still held after load, measured).
  const scratch = { bytes: new Uint8Array(0) };
  /** Of an expert's bytes, a token reads k / E on average. */
  const expertShare = config.moe === null ? 1 : config.moe.numExpertsUsed / config.moe.numExperts;
  const matrix = async (name: string, parts: readonly HostTensor[], share = 1): Promise<DenseWeight> => {
    const runs: HostTensor[][] = [];
    for (const p of parts) {
      if (runs.length > 0 && runs.at(-1)![0]!.dtype === p.dtype) runs.at(-1)!.push(p);
      else runs.push([p]);
    }
    const prepared: DenseWeight[] = [];
    repacked += parts.reduce((a, p) => a + p.data.byteLength, 0);
    for (const run of runs) {
      const stacked = stackRows(`${name}.${prepared.length}`, run, scratch);
      bytesPerToken += stacked.data.byteLength * share;
      prepared.push(await dense.prepare(runs.length === 1 ? { ...stacked, name } : stacked));
    }
    return prepared.length === 1 ? prepared[0]! : new RowStack(prepared);
  };

  const layers: LayerWeights[] = [];
  for (let i = 0; i < config.numLayers; i++) {
    const n = (suffix: string): string => layerName(i, suffix);
    const qkvParts = ['q_proj', 'k_proj', 'v_proj'].map((p) => get(n(`self_attn.${p}.weight`)));
    let qkvBias: Float32Array | null = null;
    if (config.attentionBias) {
      const biases = ['q_proj', 'k_proj', 'v_proj'].map((p) => {
        const t = get(n(`self_attn.${p}.bias`));
        repacked += t.data.byteLength;
        return tensorToF32(t);
      });
      qkvBias = ops.allocF32(biases.reduce((a, b) => a + b.length, 0));
      let at = 0;
      for (const b of biases) {
        qkvBias.set(b, at);
        at += b.length;
      }
    }
    const attention: AttentionWeights = {
      inputNorm: vector(n('input_layernorm.weight')),
      qkv: await matrix(n('self_attn.qkv'), qkvParts),
      qkvBias,
      qNorm: hasQkNorm(config) ? vector(n('self_attn.q_norm.weight')) : null,
      kNorm: hasQkNorm(config) ? vector(n('self_attn.k_norm.weight')) : null,
      o: await matrix(n('self_attn.o_proj.weight'), [get(n('self_attn.o_proj.weight'))]),
      oBias: config.gptOss !== undefined ? vector(n(O_PROJ_BIAS)) : null,
      sinks: config.gptOss !== undefined ? vector(n(ATTENTION_SINKS)) : null,
      postNorm: vector(n('post_attention_layernorm.weight')),
    };
    if (isMoeLayer(config.moe, i)) {
      const experts: ExpertWeights[] = [];
      const E = config.moe.numExperts;
      const all = (proj: ExpertProj): HostTensor[] => Array.from({ length: E }, (_, e) => get(expertName(i, e, proj)));
      const inPlace =
        options.expertsInPlace === false || config.moe.expertBias === true || dense.expertsInPlace === undefined
          ? null
          : dense.expertsInPlace(all('gate_proj'), all('up_proj'), all('down_proj'));
      if (inPlace !== null) {
        inPlaceBytes += inPlace.bytes;
        bytesPerToken += inPlace.bytes * expertShare;
      }
      for (let e = 0; e < (inPlace === null ? E : 0); e++) {
        const x = (proj: ExpertProj): HostTensor => get(expertName(i, e, proj));
        const biased = config.moe.expertBias === true;
        experts.push({
          gateUp: await matrix(n(`mlp.experts.${e}.gate_up`), [x('gate_proj'), x('up_proj')], expertShare),
          down: await matrix(expertName(i, e, 'down_proj'), [x('down_proj')], expertShare),
          gateUpBias: biased ? vectors([expertBiasName(i, e, 'gate_proj'), expertBiasName(i, e, 'up_proj')]) : null,
          downBias: biased ? vector(expertBiasName(i, e, 'down_proj')) : null,
        });
      }
      const router = await matrix(n('mlp.gate.weight'), [get(n('mlp.gate.weight'))]);
      const scoreBias = config.moe.gating === 'sigmoid' ? vector(n(ROUTER_BIAS)) : null;
      const routerBias = config.moe.expertBias === true ? vector(n(ROUTER_LOGIT_BIAS)) : null;
      const s = (proj: ExpertProj): HostTensor => get(sharedExpertName(i, proj));
      const shared =
        (config.moe.numSharedExperts ?? 0) === 0
          ? null
          : {
              gateUp: await matrix(n('mlp.shared_experts.gate_up'), [s('gate_proj'), s('up_proj')]),
              down: await matrix(sharedExpertName(i, 'down_proj'), [s('down_proj')]),
              gateUpBias: null,
              downBias: null,
            };
      layers.push({ ...attention, moe: { router, scoreBias, routerBias, shared, experts, inPlace } });
      continue;
    }
    layers.push({
      ...attention,
      preFfnNorm: config.gemma3 !== null ? vector(n('pre_feedforward_layernorm.weight')) : null,
      postFfnNorm:
        config.gemma3 !== null
          ? vector(n('post_feedforward_layernorm.weight'))
          : config.arch === 'glm4'
            ? vector(n(GLM4_POST_MLP_NORM))
            : null,
      attnPostNorm: config.arch === 'glm4' ? vector(n(GLM4_POST_ATTN_NORM)) : null,
      gateUp: await matrix(n('mlp.gate_up'), [get(n('mlp.gate_proj.weight')), get(n('mlp.up_proj.weight'))]),
      down: await matrix(n('mlp.down_proj.weight'), [get(n('mlp.down_proj.weight'))]),
      moe: null,
    });
  }
  const embed = get(EMBED);
  const lmHead = await matrix(LM_HEAD, [config.tieWordEmbeddings ? { ...embed, name: LM_HEAD } : get(LM_HEAD)]);
  const ropeLocal =
    config.gemma3 === null
      ? null
      : ropeTable({ headDim: config.headDim, ropeTheta: config.gemma3.ropeLocalTheta, ropeScaling: { type: 'none' } });
  const finalNorm = vector(FINAL_NORM);
  const bytes = { repacked, inPlace: embed.data.byteLength + inPlaceBytes };
  return { ropeLocal, embed, layers, finalNorm, lmHead, bytesPerToken, bytes };
}

/**
 * The start-up line: how the file reached memory and what became of its bytes, e.g.
 * "weights mapped read-only (mmap): 8.78 GB repacked by the native kernels, 0.31 GB read in place".
 */
export function describeWeights(
  file: { readonly how: 'mmap' | 'copy'; readonly fellBack: string | null },
  bytes: WeightBytes,
  dense: DenseKernels['name'],
): string {
  const gb = (n: number): string => `${(n / 1e9).toFixed(2)} GB`;
  const how =
    file.how === 'mmap'
      ? 'mapped read-only (mmap)'
      : file.fellBack === null
        ? 'read into memory (copy)'
        : `read into memory, not mapped (${file.fellBack})`;
  return (
    `weights ${how}: ${gb(bytes.repacked)} repacked into the ${dense} kernels' memory, ` +
    `${gb(bytes.inPlace)} read in place (the embedding; routed experts in a layout the kernels read)`
  );
}

/**
 * One matrix whose rows are those of `parts` in order (all of `cols` columns). With `scratch`,
 * parts of one dtype are stacked into its buffer (grown as needed): valid until the next call.
 */
export function stackRows(name: string, parts: readonly HostTensor[], scratch?: { bytes: Uint8Array }): HostTensor {
  assert(parts.length > 0, 'stackRows: no parts');
  const cols = parts[0]!.shape[1]!;
  assert(
    parts.every((p) => p.shape.length === 2 && p.shape[1] === cols),
    () => `${name}: stacked matrices must share their column count`,
  );
  if (parts.length === 1) return parts[0]!;
  const rows = parts.reduce((a, p) => a + p.shape[0]!, 0);
  const sameDtype = parts.every((p) => p.dtype === parts[0]!.dtype);
  const dtype: WeightDType = sameDtype ? parts[0]!.dtype : 'f32';
  const size = byteSize(dtype, rows * cols);
  if (scratch !== undefined && sameDtype && scratch.bytes.byteLength < size) scratch.bytes = new Uint8Array(size);
  const data = scratch !== undefined && sameDtype ? scratch.bytes.subarray(0, size) : new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    const bytes = sameDtype ? p.data : new Uint8Array(tensorToF32(p).buffer);
    data.set(bytes, at);
    at += bytes.byteLength;
  }
  assert(at === data.byteLength, () => `${name}: stacked ${at} bytes into ${data.byteLength}`);
  return { name, dtype, shape: [rows, cols], data };
}
