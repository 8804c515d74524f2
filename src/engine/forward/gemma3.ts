// The forward pass of Gemma 3 over a batch of sequences, beside forward/llama.ts's Llama-family one and
// with the same contract (one matmul per weight per step; RoPE, K/V writes and attention per
// sequence; no ownership checks, no allocation, no page outside the page tables). Gemma 3's
// differences, top to bottom:
//   - the embedding row is scaled by sqrt(d) (in f32, as llama.cpp and HF do);
//   - per-head RMSNorm of q and k before RoPE (as Qwen3);
//   - local layers: RoPE base ropeLocalTheta, attention over a sliding window of the last
//     `slidingWindow` positions; global layers: ropeTheta (and its scaling), every position;
//   - attention scale query_pre_attn_scalar^-1/2;
//   - RMSNorm of the attention output before the residual add, and around the MLP
//     (pre_feedforward / post_feedforward), whose gate is GELU-tanh, not SiLU;
//   - optional final logit softcapping.
// Norm weights are the multipliers (1 + w of HF's Gemma3RMSNorm; what GGUF stores): see
// gemma3-config.ts. Every layer writes K/V for every position, local or global (see
// docs/ARCHITECTURE.md, "KV of sliding-window layers").
import { assert } from '../../core/index.js';
import { dequantize } from '../../kernels/index.js';
import type { Activations } from '../activations.js';
import { attendEachSequence } from './layer-attention.js';
import { splitRows, type ForwardBatch, type ForwardModel } from './llama.js';
import { matmulRows } from '../row-stack.js';

/** Runs the batch; writes K/V of every token into its pages; returns logits [R, V] (a view into `a`). */
export async function forwardGemma3(m: ForwardModel, batch: ForwardBatch, a: Activations): Promise<Float32Array> {
  const { config, weights: w, dense, ops } = m;
  const g = config.gemma3;
  assert(g !== null && w.ropeLocal !== null, 'forwardGemma3: not a gemma3 model');
  const { hiddenSize: d, intermediateSize: ff, numHeads, numKvHeads, headDim, rmsNormEps: eps } = config;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const T = batch.numTokens;
  const R = batch.logitRows.length;
  assert(
    T > 0 && T <= a.maxTokens && R <= a.maxLogitRows,
    () => `forward: ${T} tokens / ${R} logit rows exceed the activations (${a.maxTokens} / ${a.maxLogitRows})`,
  );
  assert(
    batch.seqs.every((s) => s.rope === null),
    'forwardGemma3: one RoPE table per layer kind',
  );
  const attentionShape = { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(g.queryPreAttnScalar) };
  // One row (a decode step of one request): q, k, v and gate, up are views of the fused outputs, not copies.
  const one = T === 1;
  const q = one ? a.qkv.subarray(0, qDim) : a.q;
  const k = one ? a.qkv.subarray(qDim, qDim + kvDim) : a.k;
  const v = one ? a.qkv.subarray(qDim + kvDim, qDim + 2 * kvDim) : a.v;
  const gate = one ? a.gateUp.subarray(0, ff) : a.gate;
  const up = one ? a.gateUp.subarray(ff, 2 * ff) : a.up;

  // Embedding, scaled: x[t] = embed[token t] * sqrt(d)                   x: [T, d]
  const embedScale = Math.fround(Math.sqrt(d));
  for (let t = 0; t < T; t++) {
    const row = a.x.subarray(t * d, (t + 1) * d);
    dequantize(w.embed.dtype, w.embed.data, a.tokens[t]! * d, d, row);
    for (let i = 0; i < d; i++) row[i] = row[i]! * embedScale;
  }

  for (let layer = 0; layer < config.numLayers; layer++) {
    const lw = w.layers[layer]!;
    const local = g.localLayers[layer]!;
    assert(lw.moe === null && lw.qNorm !== null && lw.kNorm !== null, 'gemma3: a dense layer with q/k norms');
    assert(lw.preFfnNorm !== null && lw.postFfnNorm !== null, 'gemma3 norms');

    // ---- attention ----
    ops.rmsNorm(a.x, lw.inputNorm, eps, T, d, a.xn); //                   xn: [T, d]
    await matmulRows(dense, lw.qkv, a.xn, T, a.qkv); //                    qkv: [T, qDim + 2 kvDim]
    if (!one) splitRows(a.qkv, T, null, [a.q, qDim], [a.k, kvDim], [a.v, kvDim]); // q: [T, qDim], k, v: [T, kvDim]
    ops.rmsNorm(q, lw.qNorm, eps, T * numHeads, headDim, q); //           per head
    ops.rmsNorm(k, lw.kNorm, eps, T * numKvHeads, headDim, k);
    const { invFreq, attentionFactor } = local ? w.ropeLocal : m.rope;
    const positions = a.positions;
    ops.rope({ x: q, numTokens: T, numHeads, headDim, positions, invFreq, attentionFactor });
    ops.rope({ x: k, numTokens: T, numHeads: numKvHeads, headDim, positions, invFreq, attentionFactor });
    const window = local ? { window: g.slidingWindow } : {};
    attendEachSequence(m, batch, layer, attentionShape, { q, k, v, out: a.att }, window); //  att: [T, qDim]
    await dense.matmul(lw.o, a.att, T, a.proj); //                          proj: [T, d]
    ops.rmsNorm(a.proj, lw.postNorm, eps, T, d, a.proj); //                 post_attention_layernorm
    ops.addInPlace(a.x, a.proj, T * d); //                                  x += norm(attention(x))

    // ---- MLP (GELU-tanh gated), normed before and after ----
    ops.rmsNorm(a.x, lw.preFfnNorm, eps, T, d, a.xn); //                  xn: [T, d]
    await matmulRows(dense, lw.gateUp, a.xn, T, a.gateUp); //              gateUp: [T, 2 ff]
    if (!one) splitRows(a.gateUp, T, null, [a.gate, ff], [a.up, ff]); //  gate, up: [T, ff]
    ops.geluTanhMul(gate, up, a.hidden, T * ff); //                     hidden = gelu(gate) * up: [T, ff]
    await dense.matmul(lw.down, a.hidden, T, a.proj); //                    proj: [T, d]
    ops.rmsNorm(a.proj, lw.postFfnNorm, eps, T, d, a.proj); //              post_feedforward_layernorm
    ops.addInPlace(a.x, a.proj, T * d); //                                  x += norm(mlp(norm(x)))
  }

  // Final norm and lm_head, only for the rows whose logits are wanted.      xLast: [R, d]
  if (R === 0) return a.logits.subarray(0, 0);
  batch.logitRows.forEach((row, i) => a.xLast.set(a.x.subarray(row * d, (row + 1) * d), i * d));
  ops.rmsNorm(a.xLast, w.finalNorm, eps, R, d, a.xLast);
  await dense.matmul(w.lmHead, a.xLast, R, a.logits); //                    logits: [R, V]
  const V = w.lmHead.rows; // a draft model's restricted head: fewer rows (draft-head.ts)
  const logits = a.logits.subarray(0, R * V);
  const cap = g.finalLogitSoftcap;
  if (cap !== null) for (let i = 0; i < logits.length; i++) logits[i] = cap * Math.tanh(logits[i]! / cap);
  // Embeddings (forward/llama.ts): the hidden state, not capped.
  for (const i of batch.hiddenRows ?? []) logits.set(a.xLast.subarray(i * d, (i + 1) * d), i * V);
  return logits;
}
