// The probe's driver: learn the server, run the chosen checks one after another (each with its
// own seeded Rng, its budget and a progress bar), and assemble the report. Exit code 1 when any
// check found a leak, a dishonest status or a timing signal; else 2 when a check could not run
// (a connection error mid-run); else 0 (inconclusive included, and said so in the table).
import { Rng } from '../core/index.js';
import { canary, canaryBudget } from './canary.js';
import { ProbeClient } from './client.js';
import type { CheckContext, CheckOutput } from './context.js';
import { diskTiming, diskTimingBudget } from './disk-timing.js';
import { errorHonesty, errorHonestyBudget } from './error-honesty.js';
import { grammarTiming, grammarTimingBudget } from './grammar-timing.js';
import { nonInterference, nonInterferenceBudget } from './non-interference.js';
import { prefillTiming, prefillTimingBudget, responseOrder, responseOrderBudget } from './pair-checks.js';
import { prefixTiming, prefixTimingBudget } from './prefix-timing.js';
import { learnServer } from './setup.js';
import { slotReuse, slotReuseBudget } from './slot-reuse.js';
import type { CheckName, CheckResult, ProbeOptions, ProbeReport } from './types.js';

const RUNNERS: Record<
  CheckName,
  {
    run: (ctx: CheckContext) => Promise<CheckOutput>;
    budget: (budget: number, ctx: Pick<CheckContext, 'facts' | 'evictTokens'>) => number;
  }
> = {
  'error-honesty': { run: errorHonesty, budget: () => errorHonestyBudget() },
  canary: { run: canary, budget: canaryBudget },
  'non-interference': { run: nonInterference, budget: nonInterferenceBudget },
  'prefix-timing': { run: prefixTiming, budget: prefixTimingBudget },
  'grammar-timing': { run: grammarTiming, budget: grammarTimingBudget },
  'disk-timing': { run: diskTiming, budget: diskTimingBudget },
  'prefill-timing': { run: prefillTiming, budget: prefillTimingBudget },
  'response-order': { run: responseOrder, budget: responseOrderBudget },
  'slot-reuse': { run: slotReuse, budget: slotReuseBudget },
};

/** The checks that size their prompts to the context length (each says which source it used). */
const USES_CONTEXT: ReadonlySet<CheckName> = new Set([
  'error-honesty',
  'canary',
  'non-interference',
  'prefix-timing',
  'disk-timing',
  'prefill-timing',
  'response-order',
  'slot-reuse',
]);

export interface ProbeIo {
  readonly now: () => number;
  /** Progress of one check: called with done/total requests. */
  readonly progress: (check: CheckName, done: number, total: number) => void;
  readonly checkDone: (result: CheckResult) => void;
}

export async function runProbe(options: ProbeOptions, io: ProbeIo): Promise<ProbeReport> {
  const startedAt = new Date().toISOString();
  const sameKey = options.keys.A === options.keys.B;
  const client = new ProbeClient({
    baseUrl: options.baseUrl,
    keys: options.keys,
    extraBody: options.extraBody,
    timeoutMs: options.requestTimeoutMs,
    now: io.now,
  });
  const seeds = new Rng(options.seed);
  const facts = await learnServer(client, new Rng(seeds.nextU32()), options.model, sameKey, options.contextLength);
  const results: CheckResult[] = [];
  for (const check of options.checks) {
    const runner = RUNNERS[check];
    const rng = new Rng(seeds.nextU32());
    client.setCheck(check);
    const t0 = io.now();
    const budgetRequests = runner.budget(options.budget, { facts, evictTokens: options.evictTokens });
    let output: CheckOutput;
    try {
      output = await runner.run({
        client,
        facts,
        rng,
        budget: options.budget,
        batchInvariant: options.batchInvariant,
        ...(options.evictTokens === undefined ? {} : { evictTokens: options.evictTokens }),
        progress: (d, t) => io.progress(check, d, t),
      });
    } catch (error) {
      output = {
        status: 'error',
        summary: `the check failed: ${error instanceof Error ? error.message : String(error)}`,
        findings: [],
        figures: {},
        plots: [],
      };
    }
    const result: CheckResult = {
      check,
      ...output,
      numRequests: client.countFor(check),
      budgetRequests,
      wallMs: io.now() - t0,
      ...(USES_CONTEXT.has(check) ? { context: `${facts.contextLength} tokens, from ${facts.contextSource}` } : {}),
    };
    results.push(result);
    io.checkDone(result);
  }
  const { keys: _keys, ...rest } = options;
  return {
    tool: 'tessera probe',
    startedAt,
    baseUrl: options.baseUrl,
    options: { ...rest, sameKey },
    server: facts,
    results,
    exitCode: results.some((r) => r.status === 'finding') ? 1 : results.some((r) => r.status === 'error') ? 2 : 0,
    requests: client.log,
  };
}
