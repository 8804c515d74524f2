// A draft model's output head restricted to part of the vocabulary (FR-Spec, Zhao et al. 2025):
// the draft computes logits for N frequency-ranked tokens instead of all V, so each of its k - 1
// sequential one-token passes reads N rows of the output matrix, not V (on the 1B preset the
// 128256-row head is about two thirds of a 2-layer draft's weights).
// Owns: the restricted model (its lm_head tensor is the chosen rows, copied) and the map from a
// restricted logit row back to a token id; the ranking from counted tokens.
// Must never: change what the target computes, or what is accepted: the draft only proposes, and
// the target verifies every proposal over its full vocabulary (spec-verify.ts), so a token outside
// the subset is simply never drafted, and exactness is untouched.
import { assert } from '../core/index.js';
import { EMBED, LM_HEAD } from '../formats/index.js';
import { byteSize } from '../kernels/index.js';
import type { ModelWeights } from './engine.js';

/** A draft model whose head covers `tokens` only: logit row i is token tokens[i]'s. */
export interface RestrictedHead {
  readonly model: ModelWeights;
  readonly tokens: Int32Array;
}

/** `model` with its output head cut to the rows of `tokens` (distinct ids, in the order given); untied. */
export function restrictHead(model: ModelWeights, tokens: readonly number[]): RestrictedHead {
  const { config } = model;
  const V = config.vocabSize;
  const d = config.hiddenSize;
  assert(
    tokens.length > 0 && tokens.length <= V,
    () => `restrictHead: ${tokens.length} tokens of a ${V}-token vocabulary`,
  );
  const seen = new Uint8Array(V);
  for (const t of tokens) {
    assert(
      Number.isInteger(t) && t >= 0 && t < V && seen[t] === 0,
      () => `restrictHead: token ${t} is out of range or repeated`,
    );
    seen[t] = 1;
  }
  const source = model.tensors.get(config.tieWordEmbeddings ? EMBED : LM_HEAD);
  assert(source !== undefined && source.shape[0] === V, `restrictHead: the model's output head is missing`);
  const rowBytes = byteSize(source.dtype, d);
  const data = new Uint8Array(tokens.length * rowBytes);
  tokens.forEach((t, i) => data.set(source.data.subarray(t * rowBytes, (t + 1) * rowBytes), i * rowBytes));
  const tensors = new Map(model.tensors);
  tensors.set(LM_HEAD, { name: LM_HEAD, dtype: source.dtype, shape: [tokens.length, d], data });
  return { model: { config: { ...config, tieWordEmbeddings: false }, tensors }, tokens: Int32Array.from(tokens) };
}

/**
 * The `n` most frequent ids of `counts` (token id -> times seen), ties and unseen ids by id
 * ascending (a BPE vocabulary's ids follow its merge order, roughly its corpus frequency): the
 * head's tokens.
 */
export function rankTokens(counts: ReadonlyMap<number, number>, vocabSize: number, n: number): number[] {
  assert(n >= 1 && n <= vocabSize, () => `rankTokens: ${n} of ${vocabSize}`);
  const seen = [...counts.entries()]
    .filter(([t, c]) => c > 0 && t >= 0 && t < vocabSize)
    .sort((a, b) => b[1] - a[1] || a[0] - b[0])
    .map(([t]) => t)
    .slice(0, n);
  const out = [...seen];
  const taken = new Set(seen);
  for (let t = 0; out.length < n; t++) if (!taken.has(t)) out.push(t);
  return out;
}
