// The kernel interfaces. Two families, each with several backends and one shared case suite
// (src/kernels/cases/) that every backend runs; choose.ts decides which backend runs what:
//   DenseKernels  y = x · Wᵀ for one weight matrix:   ref (plain TS), wasm (SIMD), native (C)
//   OpKernels     norms, RoPE, SiLU/GELU, paged attention:  ref (plain TS), wasm (SIMD), wasm+native (attention in C)
// `ref` is the oracle: every fast kernel is tested against it.
import type { PagedKvView } from '../core/index.js';

/** Storage types of weights on disk and, for quantized ones, in memory. */
export type WeightDType = 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q4_0' | 'q4_k' | 'q5_k' | 'q6_k';

/**
 * A tensor as loaded from a file, bytes untouched. Matrices use the Hugging Face layout:
 * shape [rows, cols] = [outFeatures, inFeatures], row-major. GGML block formats (q8_0, q4_0)
 * quantize along cols in blocks of 32 (K-quants in super-blocks of 256), exactly as in the GGUF file.
 */
export interface HostTensor {
  readonly name: string;
  readonly dtype: WeightDType;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/** A weight matrix prepared by one dense backend (opaque beyond its shape). */
export interface DenseWeight {
  readonly rows: number;
  readonly cols: number;
  readonly dtype: WeightDType;
}

export interface DenseKernels {
  readonly name: 'ref' | 'wasm' | 'native';
  /** True when each output row depends only on its input row, never on the batch size. */
  readonly batchInvariant: boolean;
  /** Copy or repack a weight for this backend (the caller may reuse `weight.data` once it resolves). Quantized weights stay quantized. */
  prepare(weight: HostTensor): Promise<DenseWeight>;
  /**
   * y[m, rows] = x[m, cols] · Wᵀ, written into `out` when given (length >= m * rows; for wasm,
   * a view from OpKernels.allocF32 of the same runtime avoids a copy) and returned.
   * x and out must not overlap.
   */
  matmul(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Promise<Float32Array>;
  dispose(): Promise<void>;
  /**
   * An MoE layer's E experts (gate and up [f, d], down [d, f] each) run where their bytes lie,
   * not repacked (the native backend, for a GGUF's q4_0 / q8_0 expert tensors); null, or absent,
   * where this backend cannot: the caller prepares them as matrices.
   */
  expertsInPlace?(
    gate: readonly HostTensor[],
    up: readonly HostTensor[],
    down: readonly HostTensor[],
  ): ExpertsInPlace | null;
}

/** A layer's routed experts used in place (DenseKernels.expertsInPlace). */
export interface ExpertsInPlace {
  /** The file's bytes they read where they lie. */
  readonly bytes: number;
  /**
   * out[T, d] = for each token t, sum over j < k of weights[t k + j] times expert ids[t k + j]'s
   * SwiGLU of x[t] (added in j order); synchronous.
   */
  run(x: Float32Array, T: number, k: number, ids: Int32Array, weights: Float32Array, out: Float32Array): void;
}

/**
 * The KV pool as kernels see it (core's PagedKvView): one Float32Array (f32), Uint16Array
 * (f16 bit patterns, `dtype: 'f16'`) or Uint8Array (q8_0 blocks, `dtype: 'q8_0'`, indexed by byte
 * with kvDim replaced by kvRowUnits: core/kv-view.ts's Q8_0 LAYOUT) in page-major layout,
 *
 *   data[(((page * numLayers + layer) * 2 + kv) * pageSize + slot) * kvDim + i]
 *     kv = 0 for K, 1 for V;  kvDim = numKvHeads * headDim
 *
 * so one page's data for all layers is contiguous (one transfer frame per page).
 */
export type { PagedKvView };

export interface AttentionShape {
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /** Usually 1/sqrt(headDim). */
  readonly scale: number;
}

/**
 * One request's attention in one layer. Query token t (0 <= t < numTokens) sits at position
 * startPos + t and attends causally to positions [0, startPos + t]. Position p lives in page
 * pageTable[floor(p / pageSize)], slot p % pageSize. Kernels do no ownership checks: the
 * caller verified every page of pageTable against the ledger and stamps before calling.
 */
export interface AttentionArgs {
  readonly layer: number;
  readonly shape: AttentionShape;
  /** [numTokens, numHeads * headDim] */
  readonly q: Float32Array;
  /** [numTokens, numHeads * headDim], written */
  readonly out: Float32Array;
  readonly numTokens: number;
  readonly startPos: number;
  readonly pageTable: Int32Array;
  /**
   * Sliding window (Gemma 3's local layers): the query at position p attends only to positions
   * [max(0, p - window + 1), p], and no slot before that is read. Absent: [0, p].
   */
  readonly window?: number;
  /**
   * gpt-oss's attention sinks: one learned logit per query head ([numHeads]) that joins each
   * softmax's max and denominator and weighs no value (llama.cpp's soft_max sinks):
   *   out = Σ_p e^(s_p - m) v_p / (Σ_p e^(s_p - m) + e^(sink - m)),  m = max(max_p s_p, sink).
   * Absent: none.
   */
  readonly sinks?: Float32Array;
}

export interface RopeArgs {
  /** [numTokens, numHeads * headDim], rotated in place (rotate-half / NeoX pairing: i, i + headDim/2). */
  readonly x: Float32Array;
  readonly numTokens: number;
  readonly numHeads: number;
  readonly headDim: number;
  /** Position of each token. */
  readonly positions: Int32Array;
  /** Inverse frequencies, headDim/2 of them, with any RoPE scaling already applied. */
  readonly invFreq: Float32Array;
  /** Multiplier on cos/sin (YaRN's attention factor); 1 otherwise. */
  readonly attentionFactor: number;
}

export interface OpKernels {
  readonly name: 'ref' | 'wasm' | 'wasm+native';
  /**
   * Allocate a Float32Array that this backend reads without copying (for wasm: a view into
   * its linear memory). The KV pool is allocated once, at start-up, through this.
   */
  allocF32(length: number): Float32Array;
  /** As allocF32, for 16-bit elements: an f16 KV pool's storage. */
  allocU16(length: number): Uint16Array;
  /** As allocF32, for bytes: a q8_0 KV pool's storage. */
  allocU8(length: number): Uint8Array;
  /** out[r] = x[r] / rms(x[r]) * weight, for m rows of dim. */
  rmsNorm(x: Float32Array, weight: Float32Array, eps: number, m: number, dim: number, out: Float32Array): void;
  rope(args: RopeArgs): void;
  /** out[i] = silu(gate[i]) * up[i] */
  siluMul(gate: Float32Array, up: Float32Array, out: Float32Array, n: number): void;
  /** out[i] = gelu_tanh(gate[i]) * up[i] (GELU's tanh approximation, Gemma's gelu_pytorch_tanh) */
  geluTanhMul(gate: Float32Array, up: Float32Array, out: Float32Array, n: number): void;
  /** x[i] += y[i] */
  addInPlace(x: Float32Array, y: Float32Array, n: number): void;
  /**
   * Write K and V rows for numTokens tokens at positions [startPos, startPos + numTokens)
   * into the pages of pageTable for one layer. k, v: [numTokens, numKvHeads * headDim].
   * An f16 pool stores each value rounded to the nearest f16 (ties to even), as half.ts does; a
   * q8_0 pool stores each head's blocks as q8-kv.ts's quantizeKvRow does (every backend through it).
   */
  writeKv(
    kv: PagedKvView,
    layer: number,
    pageTable: Int32Array,
    startPos: number,
    numTokens: number,
    k: Float32Array,
    v: Float32Array,
  ): void;
  attention(kv: PagedKvView, args: AttentionArgs): void;
  /**
   * Optional (the native ops): one layer's RoPE, KV write and attention for every sequence of a
   * step in one call, the same bits as rope (q and k), writeKv and attention per sequence. Only for
   * an f32 pool, rows of fused q | k | v without bias, no window, no sinks, one RoPE table.
   */
  attendLayer?(kv: PagedKvView, args: LayerAttentionArgs): void;
  /** Optional (the native ops): out[r, i] = silu(gateUp[r, i]) * gateUp[r, width + i], siluMul's bits. */
  siluMulRows?(gateUp: Float32Array, out: Float32Array, rows: number, width: number): void;
}

/** One layer's attention over every sequence of a step (OpKernels.attendLayer). */
export interface LayerAttentionArgs {
  readonly layer: number;
  readonly shape: AttentionShape;
  /** [numTokens, qDim + 2 kvDim]: q | k | v per row, before RoPE. */
  readonly qkv: Float32Array;
  readonly numTokens: number;
  /** [numTokens, headDim]: each token's RoPE cos (first half) and sin (second half), as the rope kernel computes them. */
  readonly cosSin: Float32Array;
  /** [numSeqs, 4]: each sequence's first row, tokens, start position, and its page table's offset in `pageTables`. */
  readonly seqs: Int32Array;
  readonly numSeqs: number;
  readonly pageTables: Int32Array;
  /** [numTokens, qDim]: written with the rotated q. */
  readonly q: Float32Array;
  /** [numTokens, qDim]: the attention output. */
  readonly out: Float32Array;
}
