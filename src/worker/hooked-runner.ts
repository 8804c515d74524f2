// HookedRunner: the StepRunner a PD role hands to the EngineLoop, around the model's runner.
// The loop calls step() synchronously right after scheduler.schedule(), and complete() right
// after step() resolves; this wrapper gives the role a look before each step:
//   before(items): a verdict per item, 'run' or 'skip'. A skipped item is not computed and gets
//     a `computed` result; the role may skip only items of requests it has just aborted (the
//     scheduler is 'ending' them and drops their results in complete()).
// (What a role does after a step runs in the EngineLoop's `beside` hook, beside the next step.)
// Must never: run a skipped item, or hand results in another order than the items.
import type { BatchItem } from '../core/index.js';
import type { ItemResult, StepRunner } from '../engine/index.js';

export interface StepHooks {
  before(items: readonly BatchItem[]): ReadonlySet<BatchItem>;
}

export class HookedRunner implements StepRunner {
  readonly #inner: StepRunner;
  readonly #hooks: StepHooks;

  constructor(inner: StepRunner, hooks: StepHooks) {
    this.#inner = inner;
    this.#hooks = hooks;
  }

  async step(items: readonly BatchItem[]): Promise<ItemResult[]> {
    const skip = this.#hooks.before(items);
    const run = skip.size === 0 ? items : items.filter((item) => !skip.has(item));
    const ran = run.length === 0 ? [] : await this.#inner.step(run);
    if (skip.size === 0) return ran;
    const byItem = new Map(run.map((item, i) => [item, ran[i] as ItemResult]));
    return items.map((item): ItemResult => byItem.get(item) ?? { kind: 'computed', rid: item.rid });
  }
}
