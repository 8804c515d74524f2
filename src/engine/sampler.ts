// The sampler: one next-token id from one row of logits. First, when the request asks for
// presence or frequency penalties, the logits of the tokens it already generated are lowered
// (in a copy). Then greedy (argmax, lowest id on ties) when temperature is 0; otherwise softmax(logits / temperature), cut to the top-k tokens and
// to the top-p nucleus (ties at a cut keep the lower ids), and one draw
// u = uniformAt(seed, 0, stepIndex) walked through the cumulative mass of the kept tokens in id
// order. The draw depends only on (seed, stepIndex), so the prefill node that samples output
// token 0 and the decode node that samples the rest agree without sharing any state.
//
// A constrained request (structured output) passes a token mask: a bitmask over the ids (bit
// id % 32 of word id >> 5; ids beyond the mask are disallowed). Disallowed logits become -Infinity
// in a copy before penalties, temperature, top-k/top-p or argmax, so only allowed tokens can be
// drawn, and the draw stays the same function of (seed, stepIndex) over what is left.
//
// It must never allocate per call (scratch is per Sampler, sized to the vocabulary), use
// Math.random(), or change the logits it is given.
import {
  assert,
  InvariantError,
  uniformAt,
  usesPenalties,
  type SamplingParams,
  type TokenLogprob,
  type TopLogprob,
} from '../core/index.js';
import { nativeArgmax } from '../kernels/index.js';

/** Temperatures below this sample greedily (vLLM's _SAMPLING_EPS). */
export const GREEDY_BELOW_TEMPERATURE = 1e-5;

export type SamplingChoice = Pick<SamplingParams, 'temperature' | 'topK' | 'topP' | 'seed'> &
  Partial<Pick<SamplingParams, 'presencePenalty' | 'frequencyPenalty'>>;

/** Rows at least this long go to the native addon's argmax when it loads (argmax.c: the same id). */
const NATIVE_ARGMAX_MIN = 1024;
let fastArgmax: ((x: Float32Array) => number) | null | undefined;

/**
 * The lowest id among the largest logits. NaN logits are never chosen. A vocabulary-sized row
 * goes to the native addon's argmax where it loads (32000 logits: ~5 µs against ~25 here, about
 * 1% of an m100 q4_0 decode step); the same id as argmaxScan, which runs everywhere else.
 */
export function argmax(logits: Float32Array): number {
  if (logits.length >= NATIVE_ARGMAX_MIN) {
    if (fastArgmax === undefined) fastArgmax = nativeArgmax();
    if (fastArgmax !== null) {
      const best = fastArgmax(logits);
      if (best < 0) throw new InvariantError(`argmax over ${logits.length} logits found no finite value`);
      return best;
    }
  }
  return argmaxScan(logits);
}

/**
 * argmax in JavaScript. Four interleaved lanes (ids i mod 4), each keeping its lowest id of its
 * largest value, then merged by value and id: the same id as one scan, in half its time (a
 * vocabulary of 32000: ~24 µs against ~46).
 */
export function argmaxScan(logits: Float32Array): number {
  const n = logits.length;
  const n4 = n - (n & 3);
  let v0 = -Infinity;
  let v1 = -Infinity;
  let v2 = -Infinity;
  let v3 = -Infinity;
  let i0 = -1;
  let i1 = -1;
  let i2 = -1;
  let i3 = -1;
  for (let i = 0; i < n4; i += 4) {
    const a = logits[i]!;
    const b = logits[i + 1]!;
    const c = logits[i + 2]!;
    const d = logits[i + 3]!;
    if (a > v0) {
      v0 = a;
      i0 = i;
    }
    if (b > v1) {
      v1 = b;
      i1 = i + 1;
    }
    if (c > v2) {
      v2 = c;
      i2 = i + 2;
    }
    if (d > v3) {
      v3 = d;
      i3 = i + 3;
    }
  }
  let best = i0;
  let bestValue = v0;
  const take = (v: number, i: number): void => {
    if (i >= 0 && (v > bestValue || (v === bestValue && best >= 0 && i < best))) {
      bestValue = v;
      best = i;
    }
  };
  take(v1, i1);
  take(v2, i2);
  take(v3, i3);
  for (let i = n4; i < n; i++) take(logits[i]!, i);
  if (best < 0) {
    // Every logit is -Infinity or NaN: the model produced nothing to choose from.
    throw new InvariantError(`argmax over ${logits.length} logits found no finite value`);
  }
  return best;
}

/** The least log-probability reported: an impossible token's (JSON has no -Infinity; vLLM's floor too). */
export const MIN_LOGPROB = -9999;

export class Sampler {
  readonly vocabSize: number;
  /** Unnormalised probabilities exp((logit - max) / T), by id. */
  readonly #weights: Float64Array;
  /** Candidate, then kept, ids (in id order). */
  readonly #ids: Int32Array;
  /** Candidates' weights, sorted. */
  readonly #sorted: Float64Array;
  /** The logits with penalties applied (only for a request that asks for them). */
  readonly #penalized: Float32Array;
  /** Times each id occurs in the previous output (zero again after every call). */
  readonly #counts: Int32Array;
  /** The logits with disallowed tokens at -Infinity (only for a constrained request). */
  readonly #masked: Float32Array;

  constructor(vocabSize: number) {
    assert(Number.isInteger(vocabSize) && vocabSize > 0, () => `Sampler: bad vocabulary size ${vocabSize}`);
    this.vocabSize = vocabSize;
    this.#weights = new Float64Array(vocabSize);
    this.#ids = new Int32Array(vocabSize);
    this.#sorted = new Float64Array(vocabSize);
    this.#penalized = new Float32Array(vocabSize);
    this.#counts = new Int32Array(vocabSize);
    this.#masked = new Float32Array(vocabSize);
  }

  /**
   * The token for output position `stepIndex` (0 for a request's first generated token);
   * `previous`: the request's output tokens so far (read only when it asks for penalties).
   */
  sample(
    logits: Float32Array,
    params: SamplingChoice,
    stepIndex: number,
    previous: readonly number[] = [],
    mask?: Int32Array,
  ): number {
    assert(
      logits.length === this.vocabSize,
      () => `Sampler: ${logits.length} logits for a vocabulary of ${this.vocabSize}`,
    );
    const allowed = mask === undefined ? logits : this.#applyMask(logits, mask);
    return this.#choose(this.#penalize(allowed, params, previous), params, stepIndex);
  }

  /** A copy of `logits` with every id whose mask bit is clear at -Infinity. */
  #applyMask(logits: Float32Array, mask: Int32Array): Float32Array {
    const out = this.#masked;
    out.set(logits);
    const numIds = Math.min(this.vocabSize, mask.length * 32);
    for (let word = 0; word * 32 < numIds; word++) {
      const bits = mask[word]!;
      if (bits === -1) continue; // all 32 allowed
      const end = Math.min(numIds, word * 32 + 32);
      if (bits === 0)
        out.fill(-Infinity, word * 32, end); // none allowed: the common word under a grammar
      else for (let id = word * 32; id < end; id++) if (((bits >>> (id & 31)) & 1) === 0) out[id] = -Infinity;
    }
    out.fill(-Infinity, numIds);
    let any = false;
    for (let word = 0; word < mask.length && !any; word++) any = mask[word] !== 0;
    if (!any) throw new InvariantError('Sampler: the token mask allows no token');
    return out;
  }

  /** `logits`, or a copy with the penalties of the tokens in `previous` subtracted. */
  #penalize(logits: Float32Array, params: SamplingChoice, previous: readonly number[]): Float32Array {
    const presence = params.presencePenalty ?? 0;
    const frequency = params.frequencyPenalty ?? 0;
    if (previous.length === 0 || !usesPenalties({ presencePenalty: presence, frequencyPenalty: frequency }))
      return logits;
    const counts = this.#counts;
    for (const id of previous) {
      assert(
        Number.isInteger(id) && id >= 0 && id < this.vocabSize,
        () => `Sampler: previous token ${id} outside a vocabulary of ${this.vocabSize}`,
      );
      counts[id]!++;
    }
    const out = this.#penalized;
    out.set(logits);
    for (const id of previous) {
      const n = counts[id]!;
      if (n === 0) continue; // already applied for this id
      out[id] = out[id]! - presence - frequency * n;
      counts[id] = 0;
    }
    return out;
  }

  /**
   * `token`'s log-probability (at least MIN_LOGPROB) under the model's distribution (log-softmax of `logits`, as the
   * model gave them: before penalties and temperature), and the `topN` most likely tokens',
   * most likely first (the lower id first on ties). NaN logits count as impossible.
   */
  logprobsOf(logits: Float32Array, token: number, topN: number): TokenLogprob {
    assert(
      logits.length === this.vocabSize && Number.isInteger(token) && token >= 0 && token < this.vocabSize,
      () => `Sampler: logprobs of token ${token} over ${logits.length} logits`,
    );
    assert(Number.isInteger(topN) && topN >= 0, () => `Sampler: bad top-logprobs count ${topN}`);
    const max = logits[argmax(logits)]!;
    let sum = 0;
    for (let i = 0; i < logits.length; i++) {
      const v = logits[i]!;
      if (v === v) sum += Math.exp(v - max);
    }
    const logZ = max + Math.log(sum);
    const logprobOf = (id: number): number => {
      const v = logits[id]!;
      return v === v ? Math.max(v - logZ, MIN_LOGPROB) : MIN_LOGPROB;
    };
    // The top N by one pass, keeping them sorted: N is small (at most MAX_TOP_LOGPROBS).
    const top: number[] = [];
    const n = Math.min(topN, this.vocabSize);
    for (let i = 0; i < logits.length && n > 0; i++) {
      const v = logits[i]!;
      if (v !== v) continue;
      let at = top.length;
      while (at > 0 && logits[top[at - 1]!]! < v) at--;
      if (at >= n) continue;
      top.splice(at, 0, i);
      if (top.length > n) top.pop();
    }
    return { logprob: logprobOf(token), top: top.map((id): TopLogprob => ({ id, logprob: logprobOf(id) })) };
  }

  #choose(logits: Float32Array, params: SamplingChoice, stepIndex: number): number {
    // Below GREEDY_BELOW_TEMPERATURE 1/T overflows (5e-324 -> Infinity, then NaN probabilities):
    // greedy, as vLLM does below 1e-5. Such a request crashed the whole worker before.
    if (params.temperature < GREEDY_BELOW_TEMPERATURE) return argmax(logits);
    assert(
      params.temperature > 0 && params.topP > 0 && params.topP <= 1 && params.topK >= 0,
      () => `Sampler: bad parameters ${JSON.stringify(params)}`,
    );
    const max = logits[argmax(logits)]!;
    const weights = this.#weights;
    const invT = 1 / params.temperature;
    let total = 0;
    for (let i = 0; i < logits.length; i++) {
      const v = logits[i]!;
      const w = v === v ? Math.exp((v - max) * invT) : 0; // NaN never sampled
      weights[i] = w;
      total += w;
    }
    const numKept = this.#keep(params, total);
    const u = uniformAt(params.seed, 0, stepIndex);
    const ids = this.#ids;
    let keptMass = 0;
    for (let j = 0; j < numKept; j++) keptMass += weights[ids[j]!]!;
    let target = u * keptMass;
    for (let j = 0; j < numKept; j++) {
      target -= weights[ids[j]!]!;
      if (target < 0) return ids[j]!;
    }
    return ids[numKept - 1]!; // u * mass rounded up to the whole mass
  }

  /**
   * Fills ids[0, n) with the kept tokens in id order; returns n. Only the heaviest tokens are
   * ever sorted: those with weight >= threshold are the top of the sorted order, so once they
   * hold the top-k (or the top-p mass) the rest cannot matter. The threshold (relative to the
   * top weight, 1) goes 2^-8, 2^-16, 2^-32, ... until it underflows to 0, whose round takes
   * every token of non-zero weight: at most 9 rounds. Ties at the cut keep the lower ids.
   */
  #keep(params: SamplingChoice, total: number): number {
    const weights = this.#weights;
    const ids = this.#ids;
    const topK = params.topK > 0 ? Math.min(params.topK, this.vocabSize) : this.vocabSize;
    if (topK === this.vocabSize && params.topP === 1) {
      for (let i = 0; i < ids.length; i++) ids[i] = i;
      return ids.length;
    }
    const needMass = params.topP * total;
    for (let threshold = 2 ** -8; ; threshold *= threshold) {
      let n = 0;
      let mass = 0;
      for (let i = 0; i < weights.length; i++) {
        const w = weights[i]!;
        if (w >= threshold && w > 0) {
          ids[n] = i;
          this.#sorted[n++] = w;
          mass += w;
        }
      }
      if (threshold > 0 && n < topK && mass < needMass) continue;
      // The kept count: the top-k, then the shortest top prefix reaching the top-p mass.
      const sorted = this.#sorted.subarray(0, n).sort(); // ascending, natively
      let kept = Math.min(n, topK);
      if (params.topP < 1) {
        let cumulative = 0;
        for (let j = 0; j < kept; j++) {
          cumulative += sorted[n - 1 - j]!;
          if (cumulative >= needMass) {
            kept = j + 1;
            break;
          }
        }
      }
      // Keep every id above the cut weight, and the lowest ids among those equal to it.
      const cut = sorted[n - kept]!;
      let ties = kept;
      for (let j = n - 1; j >= 0 && sorted[j]! > cut; j--) ties--;
      let out = 0;
      for (let j = 0; j < n; j++) {
        const w = weights[ids[j]!]!;
        if (w > cut || (w === cut && ties-- > 0)) ids[out++] = ids[j]!;
      }
      return out;
    }
  }
}
