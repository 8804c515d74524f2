// Step budget: how many prefill tokens a step may carry beside its decodes, so that a step with
// running decodes stays within a time budget (Sarathi-Serve's stall-free batching, sized in
// milliseconds measured on this model and machine rather than in a fixed token count).
// Owns: the cost model of a step (milliseconds as a function of its tokens and attention pairs,
// fitted online from the steps the worker measured) and the rule that turns a budget into the
// most tokens a prefill chunk may add.
// Must never: read a clock (the worker measures each step and passes the milliseconds in), or
// return a cap that starves either side: every decode runs in every step (the plan puts decodes
// first), and a step with decodes still carries prefill (`minPrefillTokens`' time, at least one token).
//
// The model: ms(step) = fixedMs + msPerToken * numTokens + msPerPair * numPairs, a least-squares
// fit over the recent steps (each older step weighs `decay` times less), so it follows the
// machine's load. numPairs counts attention's (query, key) pairs: an item of n tokens from
// position s reads n*s + n(n+1)/2 of them (itemPairs), so a late chunk of a long prompt, whose
// every token attends over all the positions before it, is predicted at what it costs; a line in
// tokens alone saw those chunks as noise, and its fixedMs drifted from ~20 to ~80 ms under them
// (bench:pd, m100: a 256-token chunk at position 700 spends about as long in attention as in its
// matmuls). Where the steps seen cannot tell tokens from pairs apart, the fit is the line in
// tokens alone. Until the steps seen span two sizes the slope is unknown, and prefill beside
// decodes gets a cautious `uncalibratedPrefillTokens` (the first mixed step calibrates it;
// decode-only steps and chunk-only steps alone do not). Measured on bench:pd, the cap used to be
// none at all here: a server whose first steps were all full chunks put a 251-token chunk beside
// five decodes (a 720 ms step, 10x their own). Once fitted, a later run of steps of one size
// (decodes only, between prompts) keeps the last fit instead of forgetting it, for the same reason.
//
// The budget: `maxStepMs` when set; otherwise `autoFactor` x the predicted time of the step's
// decodes alone (their tokens and pairs), never under `minAutoMs`: prefill may at most double a
// decode step's time by default. The decodes' time is the model's, but never more than what
// decode-only steps were measured to take (a recent average, scaled up for more decodes than it
// saw): measured on bench:pd with the line in tokens alone, while chats' prompts kept nearly
// every step mixed, long prompts' chunks drifted its fixedMs from ~20 to ~80 ms, the budget grew
// with it to ~187 ms beside 7 decodes whose own step took ~50 ms, and the larger chunks it
// allowed drifted it further (ITL p99 4-7x the median).
// A larger budget gives long prompts a shorter time to first token and chats a longer
// inter-token latency; a smaller one the reverse (README, "Step budget").
// The plan asks `maxChunk(step so far, startPos)` for each chunk it adds (plan.ts), so a chunk
// late in a long prompt gets fewer tokens than one at its start under the same budget. Two more
// rules are the plan's, sized here: a prompt of at most `shortPromptTokens` in all is not split
// (bench:fair: a 22-token chat cut into 17 + 1 + 4 waited 3-4 steps for its first token beside
// another tenant's flood), and while several tenants share a co-located node every step is held
// to the shared budget (`maxSharedChunk`; a step without decodes as if one decode ran): the step
// a newcomer of another tenant arrives in is the one it waits for, and it was planned before the
// newcomer came, so only a short step then bounds that wait. The shared budget is `sharedFactor`
// (1.5) x the decodes' time, at least `minSharedMs` (10 ms), where a lone tenant's steps keep
// twice it, at least 20 ms: on m100 (decode steps of ~5 ms) a lone tenant's prefill fills ~15 ms
// of each ~20 ms step; beside another tenant ~5 ms of a ~10 ms one, a step in flight is half as
// long to wait for. A shared step's first chunk has its own floor, `minSharedPrefillTokens` (4
// tokens' time): the lone floor of 16 took 12-15 ms on m100 and overrode the 10 ms budget, so
// shared steps were as long as a lone tenant's (bench:fair, traced: A's 12-token chunks at
// positions 300-500, ~19 ms steps, either way). A lone tenant's steps are unchanged: the cost
// falls only on tenants sharing.

export interface StepBudgetOptions {
  /** A fixed budget per step with decodes (ms); undefined: `autoFactor` x the decodes' own time. */
  readonly maxStepMs?: number;
  /** The automatic budget as a multiple of the decode-only step's predicted time (default 2). */
  readonly autoFactor?: number;
  /** The automatic budget's floor (ms, default 20): small batches still make prefill progress. */
  readonly minAutoMs?: number;
  /** While tenants share the node: the budget as a multiple of the decodes' time (default 1.5; maxSharedChunk). */
  readonly sharedFactor?: number;
  /** While tenants share the node: the budget's floor (ms, default 10; maxSharedChunk). */
  readonly minSharedMs?: number;
  /**
   * The least prefill a step with decodes carries (default 16): the time of this many tokens at a
   * prompt's start, so fewer tokens late in a long prompt, and always at least one token: prefill
   * is never starved, and a late chunk's floor does not break the budget (a floor of 16 tokens
   * at position ~800 made m100 steps of ~80 ms beside decodes of ~30 ms, measured on bench:pd).
   */
  readonly minPrefillTokens?: number;
  /**
   * While tenants share the node (maxSharedChunk): the least prefill of a step's first chunk
   * (default 4), the time of this many tokens at a prompt's start, at least one token. The
   * shared budget's own floor: `minPrefillTokens`' 16 tokens took 12-15 ms on m100, longer than
   * the 10 ms budget they were a floor of, so every shared step was as long as a lone tenant's
   * (bench:fair: A's steps ~19 ms either way, B waiting out most of one).
   */
  readonly minSharedPrefillTokens?: number;
  /** Weight kept by older steps per new one (default 0.95: about the last 20 steps count). */
  readonly decay?: number;
  /** Prefill tokens beside decodes while the cost model has never fitted (default 32). */
  readonly uncalibratedPrefillTokens?: number;
  /**
   * A prompt of at most this many tokens is not split by the budget (default 32): it joins a step
   * whole while the step's prefill stays within this many tokens (PrefillLimit.shortPromptTokens).
   */
  readonly shortPromptTokens?: number;
}

export interface StepCostFit {
  readonly fixedMs: number;
  readonly msPerToken: number;
  /** Per attention (query, key) pair; 0 where the steps seen could not tell it from msPerToken. */
  readonly msPerPair: number;
}

/** What a step holds so far: its tokens and their attention pairs (itemPairs), and its decodes' share of both. */
export interface StepShape {
  readonly numTokens: number;
  readonly numPairs: number;
  /** Decodes are one token each. */
  readonly numDecodes: number;
  readonly numDecodePairs: number;
}

/** The step budget as the plan sees it (StepBudget, or a plain token cap in tests). */
export interface PrefillLimit {
  /** Most tokens of a prefill chunk from position `startPos` that may join a step holding `step`. */
  maxChunk(step: StepShape, startPos: number): number;
  /**
   * A prompt of at most this many tokens in all (a short chat) is not split by maxChunk: its rest
   * joins the step whole while the step's prefill stays within this many tokens, so its first
   * token comes one step after it was planned instead of two to four (plan.ts). Undefined: every
   * prompt is capped by maxChunk alone.
   */
  readonly shortPromptTokens?: number;
  /**
   * Most tokens of a chunk from `startPos` in a step (with decodes or without) while several
   * tenants share the node (plan.ts): such a step is held to a shorter budget, so another
   * tenant's request that arrives while it runs waits one short step, not a whole chunk.
   * `loose` (fault `loose-shared-budget`): the usual budget, a step without decodes as if one
   * decode ran. Undefined: no cap without decodes, the usual one with them.
   */
  maxSharedChunk?(step: StepShape, startPos: number, loose?: boolean): number;
}

/** Attention (query, key) pairs of an item of `numTokens` tokens from `startPos`: token i reads startPos + i + 1 keys. */
export const itemPairs = (startPos: number, numTokens: number): number =>
  numTokens * startPos + (numTokens * (numTokens + 1)) / 2;

/** A PrefillLimit of at most cap(numDecodes) prefill tokens in a step, wherever they start (the plan tests' caps). */
export const tokenCap = (cap: (numDecodes: number) => number): PrefillLimit => ({
  maxChunk: (step) => cap(step.numDecodes) - (step.numTokens - step.numDecodes),
});

/** Weighted least squares ms = fixedMs + msPerToken * tokens + msPerPair * pairs over the steps observed. */
export class StepCostModel {
  readonly #decay: number;
  // Decayed sums: weight; tokens (t), pairs (p), ms (y) and their products.
  #w = 0;
  #t = 0;
  #p = 0;
  #y = 0;
  #tt = 0;
  #tp = 0;
  #pp = 0;
  #ty = 0;
  #py = 0;
  #last: StepCostFit | undefined;

  constructor(decay = 0.95) {
    if (!(decay > 0 && decay <= 1)) throw new RangeError(`decay must be in (0, 1], got ${decay}`);
    this.#decay = decay;
  }

  /** One measured step: `numTokens` tokens over all its items, `numPairs` attention pairs, took `ms` milliseconds. */
  observe(numTokens: number, ms: number, numPairs = 0): void {
    if (!(numTokens > 0) || !Number.isFinite(ms) || ms < 0 || !(numPairs >= 0)) return;
    const d = this.#decay;
    this.#w = this.#w * d + 1;
    this.#t = this.#t * d + numTokens;
    this.#p = this.#p * d + numPairs;
    this.#y = this.#y * d + ms;
    this.#tt = this.#tt * d + numTokens * numTokens;
    this.#tp = this.#tp * d + numTokens * numPairs;
    this.#pp = this.#pp * d + numPairs * numPairs;
    this.#ty = this.#ty * d + numTokens * ms;
    this.#py = this.#py * d + numPairs * ms;
  }

  /**
   * The fit; undefined until the steps seen differ enough in size to give a slope. When the
   * recent steps stop differing (a run of decode-only steps), the last fit with a slope stands.
   */
  fit(): StepCostFit | undefined {
    const w = this.#w;
    if (w === 0) return undefined;
    const [mt, mp, my] = [this.#t / w, this.#p / w, this.#y / w];
    const vtt = this.#tt / w - mt * mt;
    // Steps of (nearly) one size only: the slope is unknown now.
    if (!(vtt > Math.max(1, 0.01 * mt * mt))) return this.#last;
    const vpp = this.#pp / w - mp * mp;
    const vtp = this.#tp / w - mt * mp;
    const cty = this.#ty / w - mt * my;
    const cpy = this.#py / w - mp * my;
    // A step never gets cheaper with more tokens or pairs; noise may say so for a while.
    const line = (): StepCostFit => {
      const msPerToken = Math.max(cty / vtt, 1e-6);
      return { fixedMs: Math.max(0, my - msPerToken * mt), msPerToken, msPerPair: 0 };
    };
    const det = vtt * vpp - vtp * vtp;
    let fit: StepCostFit;
    // Pairs of (nearly) one count, or that move with tokens alone (a correlation of 0.999 or
    // more), tell nothing of their own (and their variance is then mostly rounding).
    if (!(vpp > Math.max(1, 1e-4 * mp * mp) && det > 1e-3 * vtt * vpp)) fit = line();
    else {
      const perPair = (vtt * cpy - vtp * cty) / det;
      const perToken = (vpp * cty - vtp * cpy) / det;
      if (perPair <= 0) fit = line();
      else {
        const msPerToken = Math.max(perToken, 1e-6);
        // A negative per-token slope is noise too: keep it at ~0 and let pairs carry the rest.
        const msPerPair = perToken > 0 ? perPair : Math.max((cpy - msPerToken * vtp) / vpp, 0);
        fit = { fixedMs: Math.max(0, my - msPerToken * mt - msPerPair * mp), msPerToken, msPerPair };
      }
    }
    this.#last = fit;
    return fit;
  }
}

/** Predicted ms of a step of this shape under a fit. */
const predictMs = (fit: StepCostFit, numTokens: number, numPairs: number): number =>
  fit.fixedMs + fit.msPerToken * numTokens + fit.msPerPair * numPairs;

/** The budget rule over a cost model: how much prefill may join a step with decodes. */
export class StepBudget implements PrefillLimit {
  readonly model: StepCostModel;
  /** Decode-only steps, decayed like the model's: weight, summed ms, summed decodes. */
  #decodeW = 0;
  #decodeMs = 0;
  #decodeN = 0;
  readonly #o: Required<Omit<StepBudgetOptions, 'maxStepMs'>> & { readonly maxStepMs: number | undefined };
  readonly shortPromptTokens: number;

  constructor(options: StepBudgetOptions = {}) {
    const o = {
      maxStepMs: options.maxStepMs,
      autoFactor: options.autoFactor ?? 2,
      minAutoMs: options.minAutoMs ?? 20,
      sharedFactor: options.sharedFactor ?? 1.5,
      minSharedMs: options.minSharedMs ?? 10,
      minPrefillTokens: options.minPrefillTokens ?? 16,
      minSharedPrefillTokens: options.minSharedPrefillTokens ?? 4,
      decay: options.decay ?? 0.95,
      uncalibratedPrefillTokens: options.uncalibratedPrefillTokens ?? 32,
      shortPromptTokens: options.shortPromptTokens ?? 32,
    };
    if (o.maxStepMs !== undefined && !(o.maxStepMs > 0))
      throw new RangeError(`maxStepMs must be positive, got ${o.maxStepMs}`);
    if (!(o.autoFactor >= 1)) throw new RangeError(`autoFactor must be at least 1, got ${o.autoFactor}`);
    if (!(o.sharedFactor >= 1)) throw new RangeError(`sharedFactor must be at least 1, got ${o.sharedFactor}`);
    if (!(o.minSharedMs > 0)) throw new RangeError(`minSharedMs must be positive, got ${o.minSharedMs}`);
    for (const name of [
      'minPrefillTokens',
      'minSharedPrefillTokens',
      'uncalibratedPrefillTokens',
      'shortPromptTokens',
    ] as const) {
      if (!(Number.isInteger(o[name]) && o[name] >= 1)) {
        throw new RangeError(`${name} must be a positive integer, got ${o[name]}`);
      }
    }
    this.#o = o;
    this.shortPromptTokens = o.shortPromptTokens;
    this.model = new StepCostModel(o.decay);
  }

  /**
   * A step of `numTokens` tokens and `numPairs` attention pairs took `ms` (measured by the worker
   * around runner.step); when `numDecodes` equals `numTokens` it was a decode-only step, whose
   * time anchors the budget.
   */
  observe(numTokens: number, ms: number, numDecodes?: number, numPairs = 0): void {
    this.model.observe(numTokens, ms, numPairs);
    if (numDecodes === numTokens && numTokens > 0 && Number.isFinite(ms) && ms >= 0) {
      const d = this.#o.decay;
      this.#decodeW = this.#decodeW * d + 1;
      this.#decodeMs = this.#decodeMs * d + ms;
      this.#decodeN = this.#decodeN * d + numDecodes;
    }
  }

  /**
   * The budget (ms) of a step whose decodes are `numDecodes` tokens with `decodePairs` attention
   * pairs; undefined while the model has no fit. `shared`: while several tenants share the node,
   * `sharedFactor` x the decodes' time, at least `minSharedMs` (a fixed --max-step-ms stays).
   */
  budgetMs(numDecodes: number, decodePairs = 0, shared = false): number | undefined {
    if (this.#o.maxStepMs !== undefined) return this.#o.maxStepMs;
    const fit = this.model.fit();
    if (fit === undefined) return undefined;
    const predicted = predictMs(fit, numDecodes, decodePairs);
    const measured =
      this.#decodeW === 0
        ? Infinity
        : (this.#decodeMs / this.#decodeW) * Math.max(1, numDecodes / (this.#decodeN / this.#decodeW));
    const [factor, floor] = shared
      ? [this.#o.sharedFactor, this.#o.minSharedMs]
      : [this.#o.autoFactor, this.#o.minAutoMs];
    return Math.max(floor, factor * Math.min(predicted, measured));
  }

  /**
   * Most tokens of a chunk from `startPos` beside `step` (whose decodes come first, so its pairs
   * beyond theirs are earlier chunks'): Infinity with no decodes (nothing to protect: the whole
   * chunk goes); while the model cannot predict, what is left of `uncalibratedPrefillTokens`
   * (a mixed step of that size calibrates it); else the tokens whose predicted time still fits
   * the budget, and for a step's first chunk at least the floor (`minPrefillTokens`' time).
   */
  maxChunk(step: StepShape, startPos: number): number {
    return this.#maxChunkWithin(step, startPos, false);
  }

  /**
   * While tenants share the node: most tokens of a chunk from `startPos` within the shared budget
   * (`loose`, fault `loose-shared-budget`: the usual one); a step with no decodes is budgeted as
   * if one decode of no context ran in it (a prompt's first chunk still gets `minPrefillTokens`'
   * time), so every shared step takes about as long as a mixed one.
   */
  maxSharedChunk(step: StepShape, startPos: number, loose = false): number {
    const shape =
      step.numDecodes > 0
        ? step
        : { numTokens: step.numTokens + 1, numPairs: step.numPairs + 1, numDecodes: 1, numDecodePairs: 1 };
    return this.#maxChunkWithin(shape, startPos, !loose);
  }

  #maxChunkWithin(step: StepShape, startPos: number, shared: boolean): number {
    if (step.numDecodes === 0) return Infinity;
    const prefillSoFar = step.numTokens - step.numDecodes;
    const fit = this.model.fit();
    const budget = this.budgetMs(step.numDecodes, step.numDecodePairs, shared);
    if (fit === undefined || budget === undefined) return Math.max(0, this.#o.uncalibratedPrefillTokens - prefillSoFar);
    const room = budget - predictMs(fit, step.numTokens, step.numPairs);
    const fits = maxTokensWithin(fit, startPos, room);
    if (prefillSoFar > 0) return fits;
    const min = shared ? this.#o.minSharedPrefillTokens : this.#o.minPrefillTokens;
    const floorMs = fit.msPerToken * min + fit.msPerPair * itemPairs(0, min);
    return Math.max(fits, maxTokensWithin(fit, startPos, floorMs), 1);
  }

  /** Most prefill tokens from position 0 beside `numDecodes` decodes of no context (a summary for tests and logs). */
  prefillCap(numDecodes: number): number {
    return this.maxChunk({ numTokens: numDecodes, numPairs: 0, numDecodes, numDecodePairs: 0 }, 0);
  }
}

/** Largest n with msPerToken * n + msPerPair * itemPairs(startPos, n) <= roomMs (0 when none fits). */
function maxTokensWithin(fit: StepCostFit, startPos: number, roomMs: number): number {
  if (!(roomMs > 0)) return 0;
  // (msPerPair / 2) n^2 + (msPerToken + msPerPair (startPos + 1/2)) n - roomMs <= 0
  const a = fit.msPerPair / 2;
  const b = fit.msPerToken + fit.msPerPair * (startPos + 0.5);
  const n = a > 0 ? (-b + Math.sqrt(b * b + 4 * a * roomMs)) / (2 * a) : roomMs / b;
  return Math.floor(n + 1e-9);
}
