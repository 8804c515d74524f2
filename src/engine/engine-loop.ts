// EngineLoop: the step loop every role's worker runs (colocated today; prefill and decode reuse
// it). It owns the timing of steps; what a step means is the scheduler's and the runner's.
//
// One turn of the loop:
//   1. plan = scheduler.schedule(budget); plan.events (ends decided while planning) go out; the
//      step budget (scheduler/step-budget.ts) sizes each prefill chunk from measured steps
//   2. results = await runner.step(plan.items)  (page checks, K/V writes, stamps, logits); the
//      step's milliseconds (the `now` clock around it), tokens and attention pairs go to the step
//      budget's cost model.
//      Right after runner.step() was called (the forward pass is on the engine thread now) the
//      role's `beside` runs: work that reads what earlier steps finished (a prefill's KvChunk
//      sends) overlaps this step's compute instead of waiting between steps
//   3. sample every item that wanted logits (step-results.ts), while its logits are valid; a
//      decode with drafts is verified (spec-verify.ts) and its rejected positions' stamps are
//      rolled back in the pool right here, before complete() counts the accepted ones
//   4. events = scheduler.complete(results) go out to the role (onEvents), synchronously
//   5. checkIntegrity() around the step when `checkEveryStep` (tests), else only when idle
//   6. yield to the event loop (setImmediate), so HTTP, aborts and new requests get in — only
//      when the step never let it turn (a runner on this thread). A step on the engine thread
//      already let them in while it ran, and the next step starts at once: the I/O that is ready
//      then runs beside that step instead of between the two, with the engine thread idle.
//      `tessera serve`, m100, 16 streams: the engine thread's idle time between steps fell from
//      2.5-2.8 ms to 1.4-1.6 ms per ~35 ms step (7.0% of its time to 4.5%)
// With nothing running or waiting it runs `beside` (nothing follows to overlap it with), checks
// integrity once and sleeps until wake(); a turn that planned nothing runs `beside` too.
//
// A throw from the runner, the scheduler or an integrity check is a bug (a broken invariant):
// the loop stops, calls onFatal, and does not step again. It must never run two steps at once
// or call schedule() twice without complete() between.
import { setImmediate as yieldToEventLoop, setTimeout as sleep } from 'node:timers/promises';
import type { BatchItem, FaultSet, RequestId } from '../core/index.js';
import type { ItemResult } from './runner.js';
import type { PagePool } from '../pages/index.js';
import { itemPairs, StepBudget, type Scheduler, type SchedulerEvent, type StepCostFit } from '../scheduler/index.js';
import { takeHiddenStates } from './embeddings.js';
import { takePromptRows, type PromptLogprobs } from './prompt-logprobs.js';
import type { DraftModel } from './draft-model.js';
import { rollbackRejected } from './spec-verify.js';
import { toStepResults, type SamplingState, type TokenSampler } from './step-results.js';

/** What runs one step (src/engine's ModelRunner, structurally). */
export interface StepRunner {
  step(items: readonly BatchItem[]): Promise<ItemResult[]>;
}

export interface EngineLoopOptions {
  readonly scheduler: Scheduler;
  readonly runner: StepRunner;
  readonly sampler: TokenSampler;
  /** The sampling state of a request in the step (the role keeps the parameters); undefined once it ended. */
  readonly samplingOf: (rid: RequestId) => SamplingState | undefined;
  /** A request's prompt log-probabilities record and its tokens so far (prompt-logprobs.ts); none: no such requests. */
  readonly promptLogprobsOf?: (
    rid: RequestId,
  ) => { readonly record: PromptLogprobs; readonly numTokens: number } | undefined;
  /** Where an embedding request's hidden state goes (embeddings.ts); none: no such requests. */
  readonly onHiddenState?: (rid: RequestId, hidden: Float32Array) => void;
  /** The scheduler's events, in order, as soon as they happen. */
  readonly onEvents: (events: readonly SchedulerEvent[]) => void;
  /** The loop stopped on a bug; nothing runs after this. */
  readonly onFatal: (error: unknown) => void;
  readonly faults: FaultSet;
  /** checkIntegrity() after every step (tests), not only when idle. */
  readonly checkEveryStep: boolean;
  /**
   * Runs beside each step, awaited before sampling: constrained requests prepare their token
   * masks (src/grammar) while the forward pass computes. Must not reject (a request's own
   * failure shows when its mask is asked for).
   */
  readonly prepareSampling?: (items: readonly BatchItem[]) => Promise<void>;
  /**
   * The role's work beside the step in flight, called once per turn right after runner.step()
   * was called, or when no step follows (idle, or nothing planned). It sees the scheduler as of
   * the last complete() plus the plan in flight: a request's numComputed counts finished steps
   * only, and the stamps cover exactly those positions (the runner stamps after the step), so
   * reading stamped slots never touches a slot the step in flight writes. Must not throw.
   */
  readonly beside?: () => void;
  /**
   * The runner's pool, where the scheduler plans speculative decodes (SchedulerOptions.speculation):
   * each step's rejected draft positions are rolled back in it (spec-verify.ts).
   */
  readonly pool?: PagePool;
  /**
   * A draft model (--draft-model, draft-model.ts): it drafts for the speculating decodes before
   * each plan, and keeps what verification accepted in its own pool after.
   */
  readonly drafter?: DraftModel;
  /** How long to wait before planning again when requests wait but none could run (ms). */
  readonly stalledRetryMs?: number;
  /** The time budget of a step with decodes (--max-step-ms): ms, 'auto' (default) or 'off'. */
  readonly maxStepMs?: MaxStepMs;
  /** The clock that times steps for the budget (default performance.now). */
  readonly now?: () => number;
}

/** --max-step-ms: a budget in ms, 'auto' (twice the decodes' own step time) or 'off' (tokens only). */
export type MaxStepMs = number | 'auto' | 'off';

/** The step budget a worker runs with; undefined for 'off'. */
export function stepBudgetOf(maxStepMs: MaxStepMs | undefined): StepBudget | undefined {
  if (maxStepMs === 'off') return undefined;
  return new StepBudget(maxStepMs === undefined || maxStepMs === 'auto' ? {} : { maxStepMs });
}

export interface EngineLoopStats {
  readonly numSteps: number;
  /** Integrity checks run right after a step (equals numSteps when checkEveryStep). */
  readonly numStepChecks: number;
  /** Integrity checks run on becoming idle. */
  readonly numIdleChecks: number;
  readonly numTokensSampled: number;
  /** The step budget's cost model (ms = fixedMs + msPerToken * tokens + msPerPair * attention pairs); null while uncalibrated or off. */
  readonly stepCost: StepCostFit | null;
  /** The last step's milliseconds. */
  readonly lastStepMs: number;
  /** Wall time inside runner.step, summed (the dashboard's step time). */
  readonly stepMsTotal: number;
  /** Batch items stepped, summed (the dashboard's batch size). */
  readonly numItemsStepped: number;
  /** The bug that stopped the loop, if one did. */
  readonly fatal: string | null;
}

export class EngineLoop {
  readonly #o: EngineLoopOptions;
  #wake: (() => void) | undefined;
  #pendingWake = false;
  #closing = false;
  #running: Promise<void> | undefined;
  #numSteps = 0;
  #numStepChecks = 0;
  #numIdleChecks = 0;
  #numTokensSampled = 0;
  #stepMsTotal = 0;
  #numItemsStepped = 0;
  #fatal: string | null = null;
  #numRolledBack = 0;
  readonly #budget: StepBudget | undefined;
  readonly #now: () => number;
  #lastStepMs = 0;

  constructor(options: EngineLoopOptions) {
    this.#o = options;
    this.#budget = stepBudgetOf(options.maxStepMs);
    this.#now = options.now ?? (() => performance.now());
  }

  get stats(): EngineLoopStats {
    return {
      numSteps: this.#numSteps,
      numStepChecks: this.#numStepChecks,
      numIdleChecks: this.#numIdleChecks,
      numTokensSampled: this.#numTokensSampled,
      stepCost: this.#budget?.model.fit() ?? null,
      lastStepMs: this.#lastStepMs,
      stepMsTotal: this.#stepMsTotal,
      numItemsStepped: this.#numItemsStepped,
      fatal: this.#fatal,
    };
  }

  /** Speculation: draft positions written, rejected and rolled back (their stamps) so far. */
  get numRolledBack(): number {
    return this.#numRolledBack;
  }

  get healthy(): boolean {
    return this.#fatal === null;
  }

  start(): void {
    this.#running ??= this.#run().catch((error: unknown) => {
      this.#fatal = error instanceof Error ? (error.stack ?? error.message) : String(error);
      this.#o.onFatal(error);
    });
  }

  /** New work (an admitted request, an abort that frees pages): plan again soon. */
  wake(): void {
    this.#pendingWake = true;
    this.#wake?.();
  }

  /** Stops after the step in flight; resolves when the loop has ended. */
  async close(): Promise<void> {
    this.#closing = true;
    this.wake();
    await this.#running;
  }

  async #run(): Promise<void> {
    const { scheduler } = this.#o;
    while (!this.#closing) {
      if (scheduler.numRunning + scheduler.numWaiting === 0) {
        this.#o.beside?.();
        scheduler.checkIntegrity();
        this.#o.drafter?.sweep(scheduler);
        this.#o.drafter?.checkIntegrity();
        this.#numIdleChecks++;
        await this.#sleepUntilWoken();
        continue;
      }
      const turn = await this.#step();
      // A step that planned nothing (every waiting request is blocked): do not spin.
      if (turn === 'planned nothing') await Promise.race([sleep(this.#o.stalledRetryMs ?? 5), this.#sleepUntilWoken()]);
      else if (turn === 'held the event loop') await yieldToEventLoop();
    }
  }

  /** One turn: whether it planned anything, and whether the event loop turned while its step ran. */
  async #step(): Promise<'planned nothing' | 'held the event loop' | 'let the event loop turn'> {
    const o = this.#o;
    const budget = this.#budget;
    if (o.drafter !== undefined) await o.drafter.prepare(o.scheduler, this.#now);
    const plan = o.scheduler.schedule(budget);
    if (plan.events.length > 0) o.onEvents(plan.events);
    if (plan.items.length === 0) {
      o.drafter?.settle([], [], undefined);
      o.beside?.();
      return 'planned nothing';
    }
    if (o.checkEveryStep) o.scheduler.checkIntegrity(); // with the step in flight, too
    const started = this.#now();
    // Fires on the event loop's first turn after the hand-over; it never fires before a step
    // that completes on this thread (a promise settled without the loop turning) is awaited.
    // (Should the step throw, the loop stops and a late probe only sets this dead flag.)
    let turned = false;
    const probe = setImmediate(() => (turned = true));
    const stepping = Promise.all([o.runner.step(plan.items), o.prepareSampling?.(plan.items)]);
    o.beside?.(); // the forward pass was handed over synchronously: this overlaps it
    const [outputs] = await stepping;
    clearImmediate(probe);
    this.#lastStepMs = this.#now() - started;
    this.#stepMsTotal += this.#lastStepMs;
    this.#numItemsStepped += plan.items.length;
    {
      let numTokens = 0;
      let numPairs = 0;
      let numDecodes = 0;
      for (const item of plan.items) {
        numTokens += item.tokens.length;
        numPairs += itemPairs(item.startPos, item.tokens.length);
        if (item.tokens.length === 1 || item.verifiesDrafts === true) numDecodes += item.tokens.length; // drafts: decode tokens, as plan.ts counts them
      }
      budget?.observe(numTokens, this.#lastStepMs, numDecodes, numPairs);
      if (plan.items.length > 0) o.scheduler.observeStepCost(numTokens, this.#lastStepMs, numPairs);
    }
    const hidden = o.onHiddenState === undefined ? outputs : takeHiddenStates(plan.items, outputs, o.onHiddenState);
    const taken =
      o.promptLogprobsOf === undefined
        ? hidden
        : takePromptRows(plan.items, hidden, o.sampler, o.promptLogprobsOf, o.faults);
    const results = toStepResults(taken, o.sampler, o.samplingOf, o.faults, plan.items);
    // Speculation: the rejected drafts' positions are unstamped before complete() counts the rest.
    if (o.pool !== undefined) this.#numRolledBack += rollbackRejected(o.pool, plan.items, outputs, results, o.faults);
    o.drafter?.settle(plan.items, results, this.#lastStepMs);
    this.#numTokensSampled += results.filter((r) => r.kind === 'sampled').length;
    const events = o.scheduler.complete(results);
    this.#numSteps++;
    if (o.checkEveryStep) {
      o.scheduler.checkIntegrity();
      o.drafter?.checkIntegrity();
      this.#numStepChecks++;
    }
    if (events.length > 0) o.onEvents(events);
    return turned ? 'let the event loop turn' : 'held the event loop';
  }

  #sleepUntilWoken(): Promise<void> {
    if (this.#pendingWake) {
      this.#pendingWake = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.#wake = () => {
        this.#wake = undefined;
        this.#pendingWake = false;
        resolve();
      };
    });
  }
}
