// Step budget: how many prefill tokens a step may carry beside its decodes, so that a step with
// running decodes stays within a time budget (Sarathi-Serve's stall-free batching, sized in
// milliseconds measured on this model and machine rather than in a fixed token count).
// Owns: the cost model of a step (milliseconds as a function of its tokens, fitted online from
// the steps the worker measured) and the rule that turns a budget into a prefill token cap.
// Must never: read a clock (the worker measures each step and passes the milliseconds in), or
// return a cap that starves either side: every decode runs in every step (the plan puts decodes
// first), and a step with decodes still carries at least `minPrefillTokens` of prefill.
//
// The model: ms(step) = fixedMs + msPerToken * numTokens, a least-squares line over the recent
// steps (each older step weighs `decay` times less), so it follows the machine's load. Until
// the steps seen span two sizes the slope is unknown, and prefill beside decodes gets a cautious
// `uncalibratedPrefillTokens` (the first mixed step calibrates it; decode-only steps and
// chunk-only steps alone do not). Measured on bench:pd, the cap used to be none at all here: a
// server whose first steps were all full chunks put a 251-token chunk beside five decodes (a
// 720 ms step, 10x their own). Once fitted, a later run of steps of one size (decodes only,
// between prompts) keeps the last fit instead of forgetting it, for the same reason.
//
// The budget: `maxStepMs` when set; otherwise `autoFactor` x the predicted time of the step's
// decodes alone, never under `minAutoMs`: prefill may at most double a decode step's time by
// default. The decodes' time is the line's, but never more than what decode-only steps were
// measured to take (a recent average, scaled up for more decodes than it saw): measured on
// bench:pd, while chats' prompts kept nearly every step mixed, long prompts' chunks (whose
// attention grows with their position, which the line does not see) drifted the line's fixedMs
// from ~20 to ~80 ms, the budget grew with it to ~187 ms beside 7 decodes whose own step took
// ~50 ms, and the larger chunks it allowed drifted it further (ITL p99 4-7x the median).
// A larger budget gives long prompts a shorter time to first token and chats a longer
// inter-token latency; a smaller one the reverse (README, "Step budget").

export interface StepBudgetOptions {
  /** A fixed budget per step with decodes (ms); undefined: `autoFactor` x the decodes' own time. */
  readonly maxStepMs?: number;
  /** The automatic budget as a multiple of the decode-only step's predicted time (default 2). */
  readonly autoFactor?: number;
  /** The automatic budget's floor (ms, default 20): small batches still make prefill progress. */
  readonly minAutoMs?: number;
  /** Prefill tokens a step with decodes carries at least (default 16): prefill is never starved. */
  readonly minPrefillTokens?: number;
  /** Weight kept by older steps per new one (default 0.95: about the last 20 steps count). */
  readonly decay?: number;
  /** Prefill tokens beside decodes while the cost model has never fitted (default 32). */
  readonly uncalibratedPrefillTokens?: number;
}

export interface StepCostFit {
  readonly fixedMs: number;
  readonly msPerToken: number;
}

/** A weighted least-squares line ms = fixedMs + msPerToken * tokens over the steps observed. */
export class StepCostModel {
  readonly #decay: number;
  #w = 0;
  #x = 0;
  #y = 0;
  #xx = 0;
  #xy = 0;
  #last: StepCostFit | undefined;

  constructor(decay = 0.95) {
    if (!(decay > 0 && decay <= 1)) throw new RangeError(`decay must be in (0, 1], got ${decay}`);
    this.#decay = decay;
  }

  /** One measured step: `numTokens` tokens over all its items took `ms` milliseconds. */
  observe(numTokens: number, ms: number): void {
    if (!(numTokens > 0) || !Number.isFinite(ms) || ms < 0) return;
    const d = this.#decay;
    this.#w = this.#w * d + 1;
    this.#x = this.#x * d + numTokens;
    this.#y = this.#y * d + ms;
    this.#xx = this.#xx * d + numTokens * numTokens;
    this.#xy = this.#xy * d + numTokens * ms;
  }

  /**
   * The fitted line; undefined until the steps seen differ enough in size to give a slope. When
   * the recent steps stop differing (a run of decode-only steps), the last fit with a slope stands.
   */
  fit(): StepCostFit | undefined {
    const w = this.#w;
    if (w === 0) return undefined;
    const meanX = this.#x / w;
    const varX = this.#xx / w - meanX * meanX;
    // Steps of (nearly) one size only: the slope is unknown now.
    if (!(varX > Math.max(1, 0.01 * meanX * meanX))) return this.#last;
    const meanY = this.#y / w;
    const slope = (this.#xy / w - meanX * meanY) / varX;
    // A step never gets cheaper with more tokens; noise may say so for a while.
    const msPerToken = Math.max(slope, 1e-6);
    this.#last = { fixedMs: Math.max(0, meanY - msPerToken * meanX), msPerToken };
    return this.#last;
  }
}

/** The budget rule over a cost model: prefill tokens allowed in a step beside `numDecodes` decodes. */
export class StepBudget {
  readonly model: StepCostModel;
  /** Decode-only steps, decayed like the model's: weight, summed ms, summed decodes. */
  #decodeW = 0;
  #decodeMs = 0;
  #decodeN = 0;
  readonly #o: Required<Omit<StepBudgetOptions, 'maxStepMs'>> & { readonly maxStepMs: number | undefined };

  constructor(options: StepBudgetOptions = {}) {
    const o = {
      maxStepMs: options.maxStepMs,
      autoFactor: options.autoFactor ?? 2,
      minAutoMs: options.minAutoMs ?? 20,
      minPrefillTokens: options.minPrefillTokens ?? 16,
      decay: options.decay ?? 0.95,
      uncalibratedPrefillTokens: options.uncalibratedPrefillTokens ?? 32,
    };
    if (o.maxStepMs !== undefined && !(o.maxStepMs > 0))
      throw new RangeError(`maxStepMs must be positive, got ${o.maxStepMs}`);
    if (!(o.autoFactor >= 1)) throw new RangeError(`autoFactor must be at least 1, got ${o.autoFactor}`);
    for (const name of ['minPrefillTokens', 'uncalibratedPrefillTokens'] as const) {
      if (!(Number.isInteger(o[name]) && o[name] >= 1)) {
        throw new RangeError(`${name} must be a positive integer, got ${o[name]}`);
      }
    }
    this.#o = o;
    this.model = new StepCostModel(o.decay);
  }

  /**
   * A step of `numTokens` tokens took `ms` (measured by the worker around runner.step); when
   * `numDecodes` equals `numTokens` it was a decode-only step, whose time anchors the budget.
   */
  observe(numTokens: number, ms: number, numDecodes?: number): void {
    this.model.observe(numTokens, ms);
    if (numDecodes === numTokens && numTokens > 0 && Number.isFinite(ms) && ms >= 0) {
      const d = this.#o.decay;
      this.#decodeW = this.#decodeW * d + 1;
      this.#decodeMs = this.#decodeMs * d + ms;
      this.#decodeN = this.#decodeN * d + numDecodes;
    }
  }

  /** The budget (ms) of a step with `numDecodes` decodes; undefined while the model has no fit. */
  budgetMs(numDecodes: number): number | undefined {
    if (this.#o.maxStepMs !== undefined) return this.#o.maxStepMs;
    const fit = this.model.fit();
    if (fit === undefined) return undefined;
    const line = fit.fixedMs + fit.msPerToken * numDecodes;
    const measured =
      this.#decodeW === 0
        ? Infinity
        : (this.#decodeMs / this.#decodeW) * Math.max(1, numDecodes / (this.#decodeN / this.#decodeW));
    return Math.max(this.#o.minAutoMs, this.#o.autoFactor * Math.min(line, measured));
  }

  /**
   * Most prefill tokens beside `numDecodes` decodes (one token each); Infinity with no decodes
   * (nothing to protect: the whole chunk goes); `uncalibratedPrefillTokens` while the model
   * cannot predict yet (a mixed step of that size calibrates it).
   */
  prefillCap(numDecodes: number): number {
    if (numDecodes === 0) return Infinity;
    const fit = this.model.fit();
    const budget = this.budgetMs(numDecodes);
    if (fit === undefined || budget === undefined) return this.#o.uncalibratedPrefillTokens;
    const room = (budget - fit.fixedMs) / fit.msPerToken - numDecodes;
    return Math.max(this.#o.minPrefillTokens, Math.floor(room));
  }
}
