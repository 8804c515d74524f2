// The two checks over prompts spread on several prefills (pair-trials.ts):
// prefill-timing: B's TTFT on A's prompt (on the prefill that holds it for about half the prompts,
//   on another for the rest) against a fresh one: a hit on any prefill (shared key, peer fetch
//   without the tenant) is a finding; A's own repeats are the positive control. One-sided KS,
//   alpha 0.01.
// response-order: OptiLeak's channel (a scheduler that prefers cached prefixes, e.g. longest
//   prefix first, answers the cached request of a pair first): the request with A's prompt
//   finishes first in k of n of B's pairs (ties and failures left out); P(X >= k), X ~
//   Binomial(n, 1/2), below 0.01 is a finding. The same count over A's pairs is the positive
//   control: it shows whether order reveals even one's own hits here. Where it does not (a
//   scheduler that serves a tenant's requests first come first served, in shared steps), the
//   check says inconclusive: order carries no signal to measure, for A or B. While the control is not
//   yet significant, trials go on (ten at a time, up to twice those planned) before either is judged.
import { binomialTail } from './stats.js';
import type { CheckContext, CheckOutput } from './context.js';
import { ORDER_EXTEND_MAX, pairTrials, runPairs, type PairOutcome } from './pair-trials.js';
import { ALPHA } from './prefix-timing.js';
import { fmtP, timingArms, timingVerdict } from './timing-verdict.js';

export function prefillTimingBudget(budget: number): number {
  return 5 * pairTrials(budget, 12) + 1;
}

export function responseOrderBudget(budget: number): number {
  return 6 * ORDER_EXTEND_MAX * pairTrials(budget, 20) + 1; // at most: the trials its control may add
}

const ORDER_TOKENS = 4;

export async function prefillTiming(ctx: CheckContext): Promise<CheckOutput> {
  const data = await runPairs(ctx, 'prefill-timing', 1, 'timing');
  const arms = timingArms();
  arms.failed.push(...data.failed);
  for (const arm of ['baseline', 'control', 'cross', 'fresh'] as const)
    for (const s of data.timing[arm]) (arms.ttftMs[arm].push(s.ttftMs), arms.ids[arm].push(s.id));
  return timingVerdict(
    arms,
    {
      cache: 'prefix (any prefill)',
      leak: "(a prefix cache or peer fetch that hands B A's pages)",
      series: {
        baseline: 'A fresh',
        control: 'A repeats its prompt (control)',
        fresh: 'B fresh',
        cross: "B sends A's prompt (cross-tenant)",
      },
      plotTitle: `TTFT of ${data.promptTokens}-token prompts spread over the prefills (empirical CDFs)`,
    },
    { figures: { trials: data.trials, promptTokens: data.promptTokens, settleMs: data.settleMs } },
  );
}

interface OrderCount {
  readonly hitFirst: number;
  readonly freshFirst: number;
  readonly ties: number;
  readonly failed: number;
  readonly n: number;
  readonly pValue: number;
  /** Among the pairs without a tie: how often the request launched first finished first (the FCFS share). */
  readonly launchedFirstWon: number;
}

export function orderCount(outcomes: readonly PairOutcome[]): OrderCount {
  const hitFirst = outcomes.filter((o) => o.first === 'hit').length;
  const freshFirst = outcomes.filter((o) => o.first === 'fresh').length;
  const decided = outcomes.filter((o) => o.first === 'hit' || o.first === 'fresh');
  const n = hitFirst + freshFirst;
  return {
    hitFirst,
    freshFirst,
    ties: outcomes.filter((o) => o.first === 'tie').length,
    failed: outcomes.filter((o) => o.first === 'failed').length,
    n,
    pValue: binomialTail(n, hitFirst, 0.5),
    launchedFirstWon: decided.filter((o) => (o.first === 'hit') === o.hitLaunchedFirst).length,
  };
}

export async function responseOrder(ctx: CheckContext): Promise<CheckOutput> {
  // More trials while A's own order is not yet significant (see pair-trials.ts): B's count is judged once, at the end.
  const data = await runPairs(ctx, 'response-order', ORDER_TOKENS, 'order', (c) => orderCount(c).pValue < ALPHA);
  const cross = orderCount(data.cross);
  const control = orderCount(data.control);
  const figures = {
    trials: data.trials,
    promptTokens: data.promptTokens,
    settleMs: data.settleMs,
    maxTokens: data.maxTokens,
    alpha: ALPHA,
    cross,
    control,
    failed: data.failed,
  };
  const plots = [
    {
      kind: 'bars' as const,
      title: "Which request of a pair finished first (A's prompt or the fresh one)",
      unit: 'pairs',
      bars: [
        { label: "B: A's prompt first", value: cross.hitFirst },
        { label: 'B: fresh first', value: cross.freshFirst },
        { label: "A: A's prompt first (control)", value: control.hitFirst },
        { label: 'A: fresh first (control)', value: control.freshFirst },
      ],
    },
  ];
  if (cross.n < 6 || control.n < 6)
    return {
      status: 'error',
      summary: `too few pairs with an order (B ${cross.n}, A ${control.n}; failed ${data.failed.length})`,
      findings: [],
      figures,
      plots,
    };
  const finding = cross.pValue < ALPHA;
  const controlSees = control.pValue < ALPHA;
  const line = (c: OrderCount) => `${c.hitFirst}/${c.n} first, p ${fmtP(c.pValue)}`;
  return {
    status: finding ? 'finding' : controlSees ? 'clean' : 'inconclusive',
    summary: finding
      ? `B's request with A's prompt finished first in ${line(cross)}`
      : controlSees
        ? `A's own cached prompt ${line(control)} (control); B's with A's prompt ${line(cross)}`
        : `order reveals not even A's own hits here (${line(control)}; launched-first won ` +
          `${control.launchedFirstWon}/${control.n}): no order signal to measure; B ${line(cross)}`,
    findings: finding
      ? [
          {
            what:
              `B's request with A's prompt finished before B's fresh one in ${line(cross)} ` +
              `(binomial, 1/2 under no cache): the order of responses reveals A's cached prefixes`,
            requests: data.cross.filter((o) => o.first === 'hit').map((o) => o.hitId),
          },
        ]
      : [],
    figures,
    plots,
  };
}
