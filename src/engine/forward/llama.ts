// The forward pass of a Llama-family model (llama, mistral, qwen2, qwen3, phi3, glm4: its outputs'
// sandwich norms; qwen3moe, glm4moe: their expert MLP in forward/moe.ts; gpt-oss: o_proj's bias,
// attention sinks, sliding-window layers, and its expert MLP in forward/moe.ts; Gemma 3's is
// forward/gemma3.ts) over a batch of sequences,
// top to bottom, in the spirit of llama2.c. Every sequence's tokens are rows of one [T, d]
// matrix, so each weight is read once per step by one dense matmul, whatever the batch
// (continuous batching); only RoPE positions, KV writes and attention are per sequence.
//
// It must never check page ownership (the runner did, for every page of every page table, before
// calling), allocate a buffer (activations.ts holds them all), or read a page outside the page
// tables it is given.
//
// Shapes: T tokens in the step, d = hiddenSize, H/Hkv query/KV heads of size hd, qDim = H·hd,
// kvDim = Hkv·hd, ff = intermediateSize, V = vocabSize, R = rows whose logits are wanted.
import { assert } from '../../core/index.js';
import { dequantize, type DenseKernels, type OpKernels, type PagedKvView } from '../../kernels/index.js';
import type { Activations } from '../activations.js';
import type { ModelConfig, RopeTable } from '../../formats/index.js';
import type { LoraBank } from '../lora.js';
import { addRowBias, moeFfn } from './moe.js';
import { matmulRows } from '../row-stack.js';
import { attendEachSequence, planLayerAttention } from './layer-attention.js';
import type { PreparedWeights } from '../weights-prepared.js';

/** One sequence's rows in the batch. */
export interface ForwardSeq {
  /** Its first row in the batch's [T, ...] arrays. */
  readonly row: number;
  readonly numTokens: number;
  /** Position of its first token; positions [0, startPos) are already in its pages. */
  readonly startPos: number;
  /** Pages holding positions [0, startPos + numTokens): position p is in pageTable[p / pageSize]. */
  readonly pageTable: Int32Array;
  /** Its own RoPE table when the model's depends on the length (dynamic NTK); else null. */
  readonly rope: RopeTable | null;
  /** The LoRA adapter its rows run with (lora.ts), by name; none: the base model. */
  readonly adapter?: string;
}

export interface ForwardBatch {
  /** T; the activations' tokens[0, T) and positions[0, T) are filled in. */
  readonly numTokens: number;
  readonly seqs: readonly ForwardSeq[];
  /** Rows whose logits are wanted, in the order the logits are returned. */
  readonly logitRows: readonly number[];
  /**
   * Indexes into logitRows whose output row holds, in its first hiddenSize floats, the final
   * hidden state (after the final norm) instead of logits: an embedding request's last token.
   */
  readonly hiddenRows?: readonly number[];
}

export interface ForwardModel {
  readonly config: ModelConfig;
  readonly weights: PreparedWeights;
  readonly rope: RopeTable;
  readonly dense: DenseKernels;
  readonly ops: OpKernels;
  /** The KV pool, allocated by `ops`. */
  readonly kv: PagedKvView;
  /** Loaded LoRA adapters; each sequence naming one gets its rows' low-rank terms (lora.ts). */
  readonly lora?: LoraBank;
}

/** Runs the batch; writes K/V of every token into its pages; returns logits [R, V] (a view into `a`). */
export async function forward(m: ForwardModel, batch: ForwardBatch, a: Activations): Promise<Float32Array> {
  const { config, weights: w, dense, ops, kv } = m;
  const { hiddenSize: d, intermediateSize: ff, vocabSize, rmsNormEps: eps } = config;
  const T = batch.numTokens;
  const R = batch.logitRows.length;
  assert(config.gemma3 === null, 'forward: Gemma 3 runs forwardGemma3 (forward/gemma3.ts; forward/arch.ts picks)');
  assert(
    T > 0 && T <= a.maxTokens && R <= a.maxLogitRows,
    () => `forward: ${T} tokens / ${R} logit rows exceed the activations (${a.maxTokens} / ${a.maxLogitRows})`,
  );
  const gptOss = config.gptOss;
  // One row (a decode step of one request): gate and up are views of the fused output, not copies.
  const one = T === 1;
  const gate = one ? a.gateUp.subarray(0, ff) : a.gate;
  const up = one ? a.gateUp.subarray(ff, 2 * ff) : a.up;

  // Embedding: x[t] = embed[token t]                                      x: [T, d]
  for (let t = 0; t < T; t++)
    dequantize(w.embed.dtype, w.embed.data, a.tokens[t]! * d, d, a.x.subarray(t * d, (t + 1) * d));

  // Every sequence's RoPE, KV write and attention in one call per layer, where the kernels have it
  // and it computes the same (forward/layer-attention.ts); else the per-sequence calls below.
  const layerAttention = planLayerAttention(m, batch, a);

  for (let layer = 0; layer < config.numLayers; layer++) {
    const lw = w.layers[layer]!;

    // ---- attention ----
    ops.rmsNorm(a.x, lw.inputNorm, eps, T, d, a.xn); //                   xn: [T, d]
    await matmulRows(dense, lw.qkv, a.xn, T, a.qkv); //                          qkv: [T, qDim + 2 kvDim]
    m.lora?.add(batch.seqs, layer, 'qkv', a.xn, a.qkv); //                  qkv += LoRA rows (lora.ts)
    if (layerAttention !== null && lw.qkvBias === null && lw.qNorm === null && lw.kNorm === null)
      ops.attendLayer!(kv, { ...layerAttention, layer }); //                att: [T, qDim]
    else attendPerSequence(m, batch, a, layer);
    await dense.matmul(lw.o, a.att, T, a.proj); //                          proj: [T, d]
    if (lw.oBias !== null) addRowBias(a.proj, T, lw.oBias); //              gpt-oss: + o_proj bias
    m.lora?.add(batch.seqs, layer, 'o', a.att, a.proj);
    if (lw.moe === null && lw.attnPostNorm !== null) ops.rmsNorm(a.proj, lw.attnPostNorm, eps, T, d, a.proj); // GLM-4
    ops.addInPlace(a.x, a.proj, T * d); //                                  x += attention(x)

    // ---- MLP (SwiGLU) ----
    ops.rmsNorm(a.x, lw.postNorm, eps, T, d, a.xn); //                    xn: [T, d]
    if (lw.moe !== null) {
      // Qwen3-MoE: routed experts instead of the SwiGLU (forward/moe.ts)    proj: [T, d]
      await moeFfn(dense, ops, lw.moe, config.moe!, a.xn, T, a.moe!, a.proj, gptOss);
      ops.addInPlace(a.x, a.proj, T * d); //                                x += moe(x)
      continue;
    }
    await matmulRows(dense, lw.gateUp, a.xn, T, a.gateUp); //                    gateUp: [T, 2 ff]
    m.lora?.add(batch.seqs, layer, 'gateUp', a.xn, a.gateUp);
    // hidden = silu(gate) * up: [T, ff], over the fused rows where the kernels can (no copy)
    if (!one && ops.siluMulRows !== undefined) ops.siluMulRows(a.gateUp, a.hidden, T, ff);
    else {
      if (!one) splitRows(a.gateUp, T, null, [a.gate, ff], [a.up, ff]); // gate, up: [T, ff]
      ops.siluMul(gate, up, a.hidden, T * ff);
    }
    await dense.matmul(lw.down, a.hidden, T, a.proj); //                    proj: [T, d]
    m.lora?.add(batch.seqs, layer, 'down', a.hidden, a.proj);
    if (lw.postFfnNorm !== null) ops.rmsNorm(a.proj, lw.postFfnNorm, eps, T, d, a.proj); // GLM-4's sandwich
    ops.addInPlace(a.x, a.proj, T * d); //                                  x += mlp(x)
  }

  // Final norm and lm_head, only for the rows whose logits are wanted.      xLast: [R, d]
  if (R === 0) return a.logits.subarray(0, 0);
  batch.logitRows.forEach((row, i) => a.xLast.set(a.x.subarray(row * d, (row + 1) * d), i * d));
  ops.rmsNorm(a.xLast, w.finalNorm, eps, R, d, a.xLast);
  await dense.matmul(w.lmHead, a.xLast, R, a.logits); //                    logits: [R, V]
  // (A draft model's restricted head has fewer rows than the vocabulary: draft-head.ts.)
  const V = w.lmHead.rows;
  assert(V <= vocabSize, 'forward: an output head wider than the vocabulary');
  for (const i of batch.hiddenRows ?? []) a.logits.set(a.xLast.subarray(i * d, (i + 1) * d), i * V);
  return a.logits.subarray(0, R * V);
}

/**
 * One layer's q, k, v (from the fused rows: bias, Qwen3's q / k norms), RoPE, and each sequence's
 * KV write and attention into a.att, one call per sequence.
 */
function attendPerSequence(m: ForwardModel, batch: ForwardBatch, a: Activations, layer: number): void {
  const { config, weights: w, ops } = m;
  const { numHeads, numKvHeads, headDim, rmsNormEps: eps } = config;
  const lw = w.layers[layer]!;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const T = batch.numTokens;
  const attentionShape = { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
  const gptOss = config.gptOss;
  // One row (a decode step of one request): q, k and v are views of the fused output, not copies.
  const one = T === 1;
  const q = one ? a.qkv.subarray(0, qDim) : a.q;
  const k = one ? a.qkv.subarray(qDim, qDim + kvDim) : a.k;
  const v = one ? a.qkv.subarray(qDim + kvDim, qDim + 2 * kvDim) : a.v;
  // q: [T, qDim], k, v: [T, kvDim]
  if (one) addBias(a.qkv, lw.qkvBias);
  else splitRows(a.qkv, T, lw.qkvBias, [a.q, qDim], [a.k, kvDim], [a.v, kvDim]);
  if (lw.qNorm !== null) ops.rmsNorm(q, lw.qNorm, eps, T * numHeads, headDim, q); // Qwen3: per head
  if (lw.kNorm !== null) ops.rmsNorm(k, lw.kNorm, eps, T * numKvHeads, headDim, k);
  rope(m, batch, q, numHeads, a.positions); //                            q, k rotated at each token's position
  rope(m, batch, k, numKvHeads, a.positions);
  // gpt-oss: its sliding layers' window, and its sinks (one logit per head in each softmax).
  const window = gptOss?.slidingLayers[layer] === true ? { window: gptOss.slidingWindow } : {};
  const sinks = gptOss?.attentionSinks === true && lw.sinks !== null ? { sinks: lw.sinks } : {};
  attendEachSequence(m, batch, layer, attentionShape, { q, k, v, out: a.att }, { ...window, ...sinks }); // att: [T, qDim]
}

/**
 * Copies each row of `src` ([T, sum of widths]) into the parts, in order, adding `bias` (one
 * value per column of src) when given: the fused projections' outputs, unfused.
 */
export function splitRows(
  src: Float32Array,
  T: number,
  bias: Float32Array | null,
  ...parts: [Float32Array, number][]
): void {
  let width = 0;
  for (const [, w] of parts) width += w;
  for (let t = 0; t < T; t++) {
    let col = 0;
    for (const [dst, w] of parts) {
      const from = t * width + col;
      if (bias === null) {
        dst.set(src.subarray(from, from + w), t * w);
      } else {
        for (let i = 0; i < w; i++) dst[t * w + i] = src[from + i]! + bias[col + i]!;
      }
      col += w;
    }
  }
}

/** row[i] += bias[i] (one fused projection row; the same sum splitRows makes). */
function addBias(row: Float32Array, bias: Float32Array | null): void {
  if (bias === null) return;
  for (let i = 0; i < bias.length; i++) row[i] = row[i]! + bias[i]!;
}

/** RoPE on x ([T, heads · hd]) at each token's position: one call, or one per sequence for dynamic NTK. */
function rope(m: ForwardModel, batch: ForwardBatch, x: Float32Array, numHeads: number, positions: Int32Array): void {
  const { headDim } = m.config;
  const width = numHeads * headDim;
  if (batch.seqs.every((s) => s.rope === null)) {
    const { invFreq, attentionFactor } = m.rope;
    m.ops.rope({ x, numTokens: batch.numTokens, numHeads, headDim, positions, invFreq, attentionFactor });
    return;
  }
  for (const s of batch.seqs) {
    const { invFreq, attentionFactor } = s.rope ?? m.rope;
    m.ops.rope({
      x: x.subarray(s.row * width, (s.row + s.numTokens) * width),
      numTokens: s.numTokens,
      numHeads,
      headDim,
      positions: positions.subarray(s.row, s.row + s.numTokens),
      invFreq,
      attentionFactor,
    });
  }
}
