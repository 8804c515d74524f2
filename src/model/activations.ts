// The forward pass's working memory, allocated once for the largest step a runner accepts
// (maxTokens rows, maxLogitRows rows of logits) and reused by every step: a decode step
// allocates no buffer. It must never be shared by two steps in flight.
//
// Buffers that dense matmuls read or write come from `allocDense` (plain memory for the native
// kernels, wasm memory for the wasm dense kernel: runner.ts's denseOutputAlloc); the rest may be
// anywhere the op kernels accept.
import type { ModelConfig } from './config.js';

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
  };
}
