// The MLP of a mixture-of-experts layer (Qwen3-MoE, GLM-4.5), called by forward/llama.ts in place of the
// dense SwiGLU: each token's router logits, softmax over all experts (GLM-4.5: sigmoid scores, chosen
// by score + a per-expert bias, weighted by the unbiased score), its top k (descending), their
// weights renormalised to sum 1 when the model says so (norm_topk_prob; GLM-4.5 then scales them by
// routed_scaling_factor); then the step's tokens
// grouped by expert, and each expert that any token chose run ONCE over all of its tokens (one
// gate|up and one down matmul with m = its token count, on whatever dense kernels the model's
// weights were prepared for: quantized experts stay quantized); last, each token's k outputs
// weighted and summed in the order they were chosen, as llama.cpp's build_moe_ffn adds them; GLM-4.5's
// shared experts (one SwiGLU over every token) added last, as its graph adds routed + shared.
// gpt-oss: a router bias on the logits, the top k by logit weighted by a softmax over those k
// (routeTopKSoftmax), each expert's gate/up/down biases, and the clamped SwiGLU (swigluOai) for SiLU.
//
// Like forward/llama.ts it must never allocate (its scratch is Activations.moe), check a page, or read
// an expert no token chose. Per-row arithmetic does not depend on which other tokens share the
// step (a row's matmul result is the backend's, its sum order fixed): batch-invariant exactly
// when the dense kernels are.
//
// Shapes: T tokens, d = hiddenSize, E experts, k used per token, f = expertIntermediateSize;
// a slot is one (token, choice) pair, s = t·k + j.
import { assert } from '../../core/index.js';
import type { DenseKernels, OpKernels } from '../../kernels/index.js';
import type { MoeScratch } from '../activations.js';
import type { GptOssParams, MoeParams } from '../../formats/index.js';
import { matmulRows } from '../row-stack.js';
import type { ExpertWeights, MoeFfnWeights } from '../weights-prepared.js';

/** proj[T, d] = the routed experts' mixture for each row of xn[T, d]. */
export async function moeFfn(
  dense: DenseKernels,
  ops: OpKernels,
  w: MoeFfnWeights,
  moe: MoeParams,
  xn: Float32Array,
  T: number,
  s: MoeScratch,
  proj: Float32Array,
  gptOss?: GptOssParams,
): Promise<void> {
  const { numExperts: E, numExpertsUsed: k, expertIntermediateSize: f } = moe;
  const d = w.router.cols;
  assert(
    T <= s.maxTokens && (w.inPlace !== null || w.experts.length === E),
    'moeFfn: more tokens than the scratch holds, or not E experts',
  );
  await dense.matmul(w.router, xn, T, s.routerLogits); //                   routerLogits: [T, E]
  if (w.routerBias !== null) addRowBias(s.routerLogits, T, w.routerBias); // gpt-oss
  if (w.scoreBias !== null) {
    routeSigmoidTopK(s.routerLogits, T, E, k, w.scoreBias, moe, s.probs, s.expertIds, s.expertWeights);
  } else if (moe.gating === 'softmax-weight') {
    routeTopKSoftmax(s.routerLogits, T, E, k, s.probs, s.expertIds, s.expertWeights);
  } else {
    routeTopK(s.routerLogits, T, E, k, moe.normTopkProb, s.probs, s.expertIds, s.expertWeights); // [T, k] each
  }
  if (w.inPlace !== null) {
    // The experts read where they lie in the file: grouping, SwiGLUs and the weighted sum in one
    // native call (kernels/native/experts.c), in the same order as below.
    w.inPlace.run(xn, T, k, s.expertIds, s.expertWeights, proj);
  } else {
    await runExperts(dense, ops, w, xn, T, k, d, f, s, proj, gptOss);
  }
  if (w.shared === null) return;
  // GLM-4.5's shared experts: every token, width f · n; proj += their output.
  await swiGlu(dense, ops, w.shared, xn, T, f * (moe.numSharedExperts ?? 0), s); //  out: [T, d]
  ops.addInPlace(proj, s.out, T * d);
}

/** The routed experts prepared as matrices: grouped by expert, each chosen one run once, mixed. */
async function runExperts(
  dense: DenseKernels,
  ops: OpKernels,
  w: MoeFfnWeights,
  xn: Float32Array,
  T: number,
  k: number,
  d: number,
  f: number,
  s: MoeScratch,
  proj: Float32Array,
  gptOss?: GptOssParams,
): Promise<void> {
  const E = w.experts.length;
  groupByExpert(s.expertIds, T * k, E, s.expertStart, s.expertCursor, s.slotOrder);

  for (let e = 0; e < E; e++) {
    const first = s.expertStart[e]!;
    const n = s.expertStart[e + 1]! - first; //                             n tokens chose expert e
    if (n === 0) continue;
    const ex = w.experts[e]!;
    for (let i = 0; i < n; i++) {
      const t = Math.trunc(s.slotOrder[first + i]! / k);
      s.xe.set(xn.subarray(t * d, (t + 1) * d), i * d); //                  xe: [n, d], its tokens' rows
    }
    await swiGlu(dense, ops, ex, s.xe, n, f, s, gptOss); //                  out: [n, d]
    for (let i = 0; i < n; i++) {
      const slot = s.slotOrder[first + i]!;
      s.slots.set(s.out.subarray(i * d, (i + 1) * d), slot * d); //         slots: [T·k, d]
    }
  }

  // proj[t] = Σ_j weight[t, j] · slots[t, j], j in the order chosen (f32 products and sums).
  for (let t = 0; t < T; t++) {
    const row = proj.subarray(t * d, (t + 1) * d);
    for (let j = 0; j < k; j++) {
      const slot = t * k + j;
      const weight = s.expertWeights[slot]!;
      const y = s.slots.subarray(slot * d, (slot + 1) * d);
      if (j === 0) for (let c = 0; c < d; c++) row[c] = weight * y[c]!;
      else for (let c = 0; c < d; c++) row[c] = row[c]! + Math.fround(weight * y[c]!);
    }
  }
}

/** s.out[n, d] = down(silu(gate(x)) * up(x)) for n rows of x, an expert of width f (the scratch's gateUp, gate, up, hidden). */
async function swiGlu(
  dense: DenseKernels,
  ops: OpKernels,
  ex: ExpertWeights,
  x: Float32Array,
  n: number,
  f: number,
  s: MoeScratch,
  gptOss?: GptOssParams,
): Promise<void> {
  await matmulRows(dense, ex.gateUp, x, n, s.gateUp); //                    gateUp: [n, 2f]
  if (ex.gateUpBias !== null) addRowBias(s.gateUp, n, ex.gateUpBias); //    gpt-oss: + gate | up biases
  for (let i = 0; i < n; i++) {
    s.gate.set(s.gateUp.subarray(2 * i * f, (2 * i + 1) * f), i * f); //     gate, up: [n, f]
    s.up.set(s.gateUp.subarray((2 * i + 1) * f, (2 * i + 2) * f), i * f);
  }
  if (gptOss !== undefined)
    swigluOai(s.gate, s.up, s.hidden, n * f, gptOss); // hidden: [n, f]
  else ops.siluMul(s.gate, s.up, s.hidden, n * f); //                       hidden = silu(gate) * up: [n, f]
  await dense.matmul(ex.down, s.hidden, n, s.out); //                       out: [n, d]
  if (ex.downBias !== null) addRowBias(s.out, n, ex.downBias); //           gpt-oss: + down bias
}

/** x[r] += bias for each of `rows` rows of bias.length (f32 sums, as ggml_add). */
export function addRowBias(x: Float32Array, rows: number, bias: Float32Array): void {
  const w = bias.length;
  for (let r = 0; r < rows; r++) for (let i = 0; i < w; i++) x[r * w + i] = x[r * w + i]! + bias[i]!;
}

/**
 * gpt-oss's clamped SwiGLU, as ggml's swiglu_oai (f32): g = min(gate, limit), u = clamp(up, -limit,
 * limit), out = g / (1 + e^(-alpha g)) · (u + 1). limit null: no clamp (a variant, not gpt-oss).
 */
export function swigluOai(gate: Float32Array, up: Float32Array, out: Float32Array, n: number, g: GptOssParams): void {
  const limit = g.swigluLimit ?? Infinity;
  const alpha = Math.fround(g.swigluAlpha);
  for (let i = 0; i < n; i++) {
    const x = Math.min(gate[i]!, limit);
    const y = Math.min(Math.max(up[i]!, -limit), limit);
    const glu = Math.fround(x / Math.fround(1 + Math.fround(Math.exp(Math.fround(alpha * -x)))));
    out[i] = glu * Math.fround(y + 1);
  }
}

/**
 * gpt-oss's routing, as llama.cpp's build_moe_ffn with SOFTMAX_WEIGHT gating: for each of T rows of
 * (biased) logits [T, E], the k largest in descending order (the lower id first on a tie) into ids
 * [T, k], and a softmax over those k logits alone (f32, as ggml's soft_max) into weights [T, k].
 * probs: [E] scratch.
 */
export function routeTopKSoftmax(
  logits: Float32Array,
  T: number,
  E: number,
  k: number,
  probs: Float32Array,
  ids: Int32Array,
  weights: Float32Array,
): void {
  for (let t = 0; t < T; t++) {
    probs.set(logits.subarray(t * E, (t + 1) * E));
    for (let j = 0; j < k; j++) {
      let best = -1;
      for (let e = 0; e < E; e++) {
        if (probs[e]! === -Infinity) continue; // taken (marked below)
        if (best < 0 || probs[e]! > probs[best]!) best = e;
      }
      ids[t * k + j] = best;
      weights[t * k + j] = probs[best]!;
      probs[best] = -Infinity;
    }
    const max = weights[t * k]!; // the first chosen is the largest
    let sum = 0;
    for (let j = 0; j < k; j++) {
      const e = Math.fround(Math.exp(weights[t * k + j]! - max));
      weights[t * k + j] = e;
      sum += e;
    }
    const inv = Math.fround(1 / sum);
    for (let j = 0; j < k; j++) weights[t * k + j] = weights[t * k + j]! * inv;
  }
}

/**
 * GLM-4.5's routing, as llama.cpp's build_moe_ffn with sigmoid gating and exp_probs_b: for each of T
 * rows of logits [T, E], scores sigmoid(logit) (f32); the k experts of highest score + bias[e], in
 * descending order (lower id first on a tie), into ids [T, k]; their unbiased scores into weights
 * [T, k], divided by their sum (clamped at 2^-14) when moe.normTopkProb, then times
 * moe.routedScalingFactor. probs: [E] scratch (the biased scores).
 */
export function routeSigmoidTopK(
  logits: Float32Array,
  T: number,
  E: number,
  k: number,
  bias: Float32Array,
  moe: MoeParams,
  probs: Float32Array,
  ids: Int32Array,
  weights: Float32Array,
): void {
  const scale = moe.routedScalingFactor ?? 1;
  for (let t = 0; t < T; t++) {
    const row = logits.subarray(t * E, (t + 1) * E);
    for (let e = 0; e < E; e++) probs[e] = Math.fround(1 / (1 + Math.exp(-row[e]!))) + bias[e]!;
    let chosenSum = 0;
    for (let j = 0; j < k; j++) {
      let best = -1;
      for (let e = 0; e < E; e++) {
        if (probs[e]! === -Infinity) continue; // taken (marked below)
        if (best < 0 || probs[e]! > probs[best]!) best = e;
      }
      const score = Math.fround(1 / (1 + Math.exp(-row[best]!)));
      ids[t * k + j] = best;
      weights[t * k + j] = score;
      chosenSum = Math.fround(chosenSum + score);
      probs[best] = -Infinity;
    }
    const total = Math.max(chosenSum, 6.103515625e-5);
    for (let j = 0; j < k; j++) {
      let weight = weights[t * k + j]!;
      if (moe.normTopkProb) weight = Math.fround(weight / total);
      if (scale !== 1) weight = Math.fround(weight * scale);
      weights[t * k + j] = weight;
    }
  }
}

/**
 * For each of T rows of logits [T, E]: softmax (f32, as ggml's soft_max), the k most probable
 * experts in descending order (the lower id first on a tie) into ids [T, k], their probabilities
 * into weights [T, k], divided by their sum when `normalise`. probs: [E] scratch.
 */
export function routeTopK(
  logits: Float32Array,
  T: number,
  E: number,
  k: number,
  normalise: boolean,
  probs: Float32Array,
  ids: Int32Array,
  weights: Float32Array,
): void {
  for (let t = 0; t < T; t++) {
    const row = logits.subarray(t * E, (t + 1) * E);
    let max = -Infinity;
    for (let e = 0; e < E; e++) max = Math.max(max, row[e]!);
    let sum = 0;
    for (let e = 0; e < E; e++) {
      probs[e] = Math.exp(row[e]! - max);
      sum += probs[e]!;
    }
    const inv = Math.fround(1 / sum);
    for (let e = 0; e < E; e++) probs[e] = probs[e]! * inv;
    let chosenSum = 0;
    for (let j = 0; j < k; j++) {
      let best = -1;
      for (let e = 0; e < E; e++) {
        if (probs[e]! < 0) continue; // taken (marked below)
        if (best < 0 || probs[e]! > probs[best]!) best = e;
      }
      ids[t * k + j] = best;
      weights[t * k + j] = probs[best]!;
      chosenSum += probs[best]!;
      probs[best] = -1;
    }
    if (!normalise) continue;
    const total = Math.fround(chosenSum);
    for (let j = 0; j < k; j++) weights[t * k + j] = weights[t * k + j]! / total;
  }
}

/**
 * Counting sort of the slots [0, numSlots) by expert: expert e's slots are order[start[e],
 * start[e + 1]), in slot (token) order. start: [E + 1], cursor: [E] scratch.
 */
export function groupByExpert(
  ids: Int32Array,
  numSlots: number,
  E: number,
  start: Int32Array,
  cursor: Int32Array,
  order: Int32Array,
): void {
  start.fill(0, 0, E + 1);
  for (let s = 0; s < numSlots; s++) start[ids[s]! + 1] = start[ids[s]! + 1]! + 1;
  for (let e = 0; e < E; e++) start[e + 1] = start[e + 1]! + start[e]!;
  cursor.set(start.subarray(0, E));
  for (let s = 0; s < numSlots; s++) {
    const e = ids[s]!;
    order[cursor[e]!] = s;
    cursor[e] = cursor[e]! + 1;
  }
}
