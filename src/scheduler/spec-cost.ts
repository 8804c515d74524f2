// Speculation's cost side: what verifying k drafted tokens costs against a plain decode step, as
// measured on this model and machine, and the draft length that pays best for an acceptance rate.
// Owns: the step cost model speculation reads (fed by the worker's measured steps) and the rule
// that turns (acceptance, cost) into a draft length. Pure and synchronous.
// Must never: read a clock (the worker passes each step's milliseconds in), or lengthen a draft
// beyond the request's maxDraft (spec-lookup.ts).
//
// A step that verifies k drafts feeds k + 1 rows. On a CPU the weights are read once for up to
// eight rows (the AVX-512 kernels' MB_MAX), but every row still costs its multiply-adds: measured
// on m100 q4_0, 2 threads of a loaded machine (bench/spec-step.ts), k = 1, 2, 4, 8 cost 1.10,
// 1.68, 2.25 and 3.60 plain steps. With per-token acceptance a, k drafts give
// E(k) = 1 + a + ... + a^k tokens for C(k) + k * d plain steps' time (d: a draft model's cost
// per drafted token, 0 for prompt lookup), so the length taken is the k <= maxDraft that
// maximises E(k) / (C(k) + k d), a the per-token acceptance (spec-lookup.ts's perTokenAcceptance),
// and none when no k beats plain decoding (E(0) / C(0) = 1). The draft model's node-level pause
// (engine/draft-model.ts) asks the same question of the node's acceptance.
// The fit is StepCostModel's (step-budget.ts): ms = fixed + perToken * tokens + perPair * pairs;
// until the steps seen differ in size it is unknown, and the adaptive length alone decides.
import { StepCostModel } from './step-budget.js';

/** Weight kept by older steps per new one: about the last 10 steps count. */
const COST_DECAY = 0.9;

/** The measured cost of extra rows in a step, for the requests of one scheduler. */
export class SpecCost {
  readonly #model = new StepCostModel(COST_DECAY);

  /** One measured step: its tokens over all items, its attention pairs, its milliseconds. */
  observe(numTokens: number, ms: number, numPairs = 0): void {
    this.#model.observe(numTokens, ms, numPairs);
  }

  /** A batch-1 plain decode step's milliseconds (one token) by the fit; undefined until fitted. */
  plainMs(): number | undefined {
    const fit = this.#model.fit();
    if (fit === undefined) return undefined;
    const one = fit.fixedMs + fit.msPerToken;
    return one > 0 ? one : undefined;
  }

  /** C(k): a batch-1 decode step with k drafts against one without; undefined until fitted. */
  ratio(k: number): number | undefined {
    const fit = this.#model.fit();
    if (fit === undefined) return undefined;
    const one = fit.fixedMs + fit.msPerToken;
    return one > 0 ? (fit.fixedMs + fit.msPerToken * (1 + k)) / one : undefined;
  }
}

/**
 * The draft length in 0..maxK with the most expected tokens per unit of time, for per-token
 * acceptance `a`, step cost ratios `cost(k)` and a draft cost `draftCost` per drafted token.
 */
export function bestDraftLength(a: number, maxK: number, cost: (k: number) => number, draftCost: number): number {
  let best = 0;
  let bestValue = 1;
  let expected = 1;
  let ak = 1;
  for (let k = 1; k <= maxK; k++) {
    ak *= a;
    expected += ak;
    const value = expected / (cost(k) + k * draftCost);
    if (value > bestValue) {
      best = k;
      bestValue = value;
    }
  }
  return best;
}
