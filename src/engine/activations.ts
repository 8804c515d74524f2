// The forward pass's working memory, allocated once for the largest step a runner accepts
// (maxTokens rows, maxLogitRows rows of logits) and reused by every step: a decode step
// allocates no buffer. It must never be shared by two steps in flight.
//
// Buffers that dense matmuls read or write come from `allocDense` (plain memory for the native
// kernels, wasm memory for the wasm dense kernel: runner.ts's denseOutputAlloc); the rest may be
// anywhere the op kernels accept.
import type { ModelConfig, MoeParams } from '../formats/index.js';

export interface Activations {
  readonly maxTokens: number;
  readonly maxLogitRows: number;
  /** [T, d] the residual stream */
  readonly x: Float32Array;
  /** [T, d] normed x, the input of every projection */
  readonly xn: Float32Array;
  /** [T, qDim + 2 kvDim] q | k | v per row, as the fused projection writes them */
  readonly qkv: Float32Array;
  /** [T, qDim] */
  readonly q: Float32Array;
  /** [T, kvDim] */
  readonly k: Float32Array;
  /** [T, kvDim] */
  readonly v: Float32Array;
  /** [T, qDim] attention output */
  readonly att: Float32Array;
  /** [T, d] output of o_proj and down_proj, added to x */
  readonly proj: Float32Array;
  /** [T, 2 ff] gate | up per row */
  readonly gateUp: Float32Array;
  /** [T, ff] */
  readonly gate: Float32Array;
  /** [T, ff] */
  readonly up: Float32Array;
  /** [T, ff] silu(gate) * up */
  readonly hidden: Float32Array;
  /** [L, d] rows of x whose logits are wanted, normed */
  readonly xLast: Float32Array;
  /** [L, vocab] */
  readonly logits: Float32Array;
  /** [T] */
  readonly tokens: Int32Array;
  /** [T] */
  readonly positions: Int32Array;
  /** [T, headDim] each token's RoPE cos | sin (forward/layer-attention.ts) */
  readonly cosSin: Float32Array;
  /** [T, 4] each sequence's first row, tokens, start position, page-table offset (forward/layer-attention.ts) */
  readonly layerSeqs: Int32Array;
  /** An MoE model's routing and expert buffers (forward/moe.ts); null for a dense model. */
  readonly moe: MoeScratch | null;
}

/** forward/moe.ts's working memory for up to maxTokens rows (k = experts per token, f = expert width). */
export interface MoeScratch {
  readonly maxTokens: number;
  /** [T, E] */
  readonly routerLogits: Float32Array;
  /** [E] one row's softmax */
  readonly probs: Float32Array;
  /** [T, k] each: chosen experts, descending, and their weights */
  readonly expertIds: Int32Array;
  readonly expertWeights: Float32Array;
  /** [E + 1], [E], [T·k]: the slots grouped by expert */
  readonly expertStart: Int32Array;
  readonly expertCursor: Int32Array;
  readonly slotOrder: Int32Array;
  /** [T, d] one expert's tokens' rows */
  readonly xe: Float32Array;
  /** [T, 2f] */
  readonly gateUp: Float32Array;
  /** [T, f] each */
  readonly gate: Float32Array;
  readonly up: Float32Array;
  readonly hidden: Float32Array;
  /** [T, d] one expert's output */
  readonly out: Float32Array;
  /** [T·k, d] every slot's expert output */
  readonly slots: Float32Array;
}

function allocateMoeScratch(
  d: number,
  moe: MoeParams,
  T: number,
  allocDense: AllocF32,
  allocOps: AllocF32,
): MoeScratch {
  const { numExperts: E, numExpertsUsed: k } = moe;
  // The widest SwiGLU run on these buffers: a routed expert's, or GLM-4.5's shared experts' (f · n).
  const f = moe.expertIntermediateSize * Math.max(1, moe.numSharedExperts ?? 0);
  return {
    maxTokens: T,
    routerLogits: allocDense(T * E),
    probs: new Float32Array(E),
    expertIds: new Int32Array(T * k),
    expertWeights: new Float32Array(T * k),
    expertStart: new Int32Array(E + 1),
    expertCursor: new Int32Array(E),
    slotOrder: new Int32Array(T * k),
    xe: allocDense(T * d),
    gateUp: allocDense(T * 2 * f),
    gate: allocOps(T * f),
    up: allocOps(T * f),
    hidden: allocDense(T * f),
    out: allocDense(T * d),
    slots: new Float32Array(T * k * d),
  };
}

export type AllocF32 = (length: number) => Float32Array;

export function allocateActivations(
  config: ModelConfig,
  maxTokens: number,
  maxLogitRows: number,
  allocDense: AllocF32,
  allocOps: AllocF32,
): Activations {
  const { hiddenSize: d, intermediateSize: ff, numHeads, numKvHeads, headDim, vocabSize } = config;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const T = maxTokens;
  return {
    maxTokens,
    maxLogitRows,
    x: allocOps(T * d),
    xn: allocDense(T * d),
    qkv: allocDense(T * (qDim + 2 * kvDim)),
    q: allocOps(T * qDim),
    k: allocOps(T * kvDim),
    v: allocOps(T * kvDim),
    att: allocDense(T * qDim),
    proj: allocDense(T * d),
    gateUp: allocDense(T * 2 * ff),
    gate: allocOps(T * ff),
    up: allocOps(T * ff),
    hidden: allocDense(T * ff),
    xLast: allocDense(maxLogitRows * d),
    logits: allocDense(maxLogitRows * vocabSize),
    tokens: new Int32Array(T),
    positions: new Int32Array(T),
    cosSin: allocOps(T * headDim),
    layerSeqs: new Int32Array(4 * T),
    moe: config.moe === null ? null : allocateMoeScratch(d, config.moe, T, allocDense, allocOps),
  };
}

/** Bytes allocateActivations takes for this config and step size (`tessera plan`'s memory rows; the logits included). */
export function activationBytes(config: ModelConfig, maxTokens: number, maxLogitRows: number): number {
  let floats = 0;
  const count: AllocF32 = (n) => {
    floats += n;
    return new Float32Array(0);
  };
  allocateActivations(config, maxTokens, maxLogitRows, count, count);
  return floats * Float32Array.BYTES_PER_ELEMENT;
}
