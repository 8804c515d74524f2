// prefix-timing: can tenant B tell from TTFT that tenant A sent a prompt (a prefix cache shared
// across tenants), as Gu et al. did at seven API providers? Each sample i is one unit, in random
// order, with its arms in random order after the prime:
//   prime:    A sends a fresh long prompt X_i (an uncached TTFT of A: the control's baseline)
//   cross:    B sends X_i                  -> compared with B's fresh prompts (cross-tenant test)
//   control:  A sends X_i again            -> compared with A's primes (same tenant: the positive
//             control that proves the check can see a cache at all)
//   fresh:    B sends a fresh prompt F_i of the same length
// Each test is a one-sided two-sample KS test (H1: the repeat is faster), with an exact p-value
// and effect sizes. A cross-tenant p < 0.01 is a finding; with a positive control at p >= 0.01
// the check is inconclusive, never clean. usage.prompt_tokens_details.cached_tokens is recorded
// as well where the server reports it.
// Budget: 4 requests per sample; samples = budget / 4 (at least 6: 1/C(12, 6) < 0.01 is possible).
import { usableTokens, type CheckContext, type CheckOutput } from './context.js';
import { randomIds, shuffle } from './prompts.js';
import { effectSize, ksGreater, median } from './stats.js';
import type { RequestRecord, Tenant } from './types.js';

export const ALPHA = 0.01;
type Arm = 'prime' | 'cross' | 'control' | 'fresh';

export function prefixTimingSamples(budget: number): number {
  return Math.max(6, Math.min(60, Math.floor(budget / 4)));
}

export function prefixTimingBudget(budget: number): number {
  return 4 * prefixTimingSamples(budget) + 1;
}

function cachedTokens(r: RequestRecord): number {
  const details = (r.usage as { prompt_tokens_details?: { cached_tokens?: number } } | undefined)
    ?.prompt_tokens_details;
  return details?.cached_tokens ?? 0;
}

export async function prefixTiming(ctx: CheckContext): Promise<CheckOutput> {
  const { client, facts, rng } = ctx;
  const samples = prefixTimingSamples(ctx.budget);
  // Long prompts (the cache saves the most compute), 5/8 of what the server admits: clear of its limits, and a
  // prefill of several pages even on a small context.
  const promptTokens = Math.max(32, Math.floor((usableTokens(facts) - 2) * 0.625));
  const total = prefixTimingBudget(ctx.budget);
  let done = 0;
  const ttft: Record<Arm, number[]> = { prime: [], cross: [], control: [], fresh: [] };
  const ids: Record<Arm, number[]> = { prime: [], cross: [], control: [], fresh: [] };
  const failed: number[] = [];
  const cachedCross: number[] = [];
  let succeeded = 0;
  let firstFailure: { arm: Arm; id: number; status: number | null; after: number; message: string } | undefined;
  const send = async (arm: Arm, tenant: Tenant, prompt: readonly number[]): Promise<void> => {
    const r = await client.stream(tenant, `prefix-timing: ${arm}`, {
      model: facts.model,
      prompt: [...prompt],
      max_tokens: 1,
      temperature: 0,
      stream_options: { include_usage: true },
    });
    ctx.progress(++done, total);
    if (r.status !== 200 || r.ttftMs === undefined) {
      failed.push(r.id);
      const message = JSON.stringify(
        (r.errorBody as { error?: { message?: unknown } } | undefined)?.error?.message ?? r.error ?? '',
      );
      firstFailure ??= { arm, id: r.id, status: r.status, after: succeeded, message };
      return;
    }
    succeeded++;
    ttft[arm].push(r.ttftMs);
    ids[arm].push(r.id);
    if (arm === 'cross' && cachedTokens(r) > 0) cachedCross.push(r.id);
  };
  // One warm-up request, not counted: the first request after start-up pays for lazy initialisation.
  await send('fresh', 'B', randomIds(rng, promptTokens));
  ttft.fresh.length = 0;
  ids.fresh.length = 0;

  for (let i = 0; i < samples; i++) {
    const x = randomIds(rng, promptTokens);
    await send('prime', 'A', x);
    const arms = shuffle(rng, [
      () => send('cross', 'B', x),
      () => send('control', 'A', x),
      () => send('fresh', 'B', randomIds(rng, promptTokens)),
    ]);
    for (const arm of arms) await arm();
  }

  // A server that first fails on B's repeat of A's prompt, after every earlier prompt of the same length (at least
  // the warm-up and A's prime of that very prompt) succeeded,
  // treats A's prompt differently for B: an oracle of A's prompts (e.g. a cross-tenant cache lookup that its own
  // defences refused, loudly).
  const oracle =
    firstFailure !== undefined && firstFailure.arm === 'cross' && firstFailure.after >= 2
      ? [
          {
            what:
              `B's repeat of A's prompt failed (HTTP ${firstFailure.status ?? 'none'}: ` +
              `${firstFailure.message}) after ${firstFailure.after} requests of the same length succeeded: the ` +
              `server treats A's prompt differently for B`,
            requests: [firstFailure.id],
          },
        ]
      : [];
  const enough = (xs: readonly number[]) => xs.length >= 3;
  if (![ttft.prime, ttft.cross, ttft.control, ttft.fresh].every(enough)) {
    return {
      status: oracle.length > 0 ? 'finding' : 'error',
      summary: oracle.length > 0 ? (oracle[0]?.what ?? '') : `too many requests failed (${failed.length})`,
      findings: oracle,
      figures: { failed, firstFailure, ttftMs: ttft },
      plots: [],
    };
  }
  const control = ksGreater(ttft.control, ttft.prime);
  const cross = ksGreater(ttft.cross, ttft.fresh);
  const controlEffect = effectSize(ttft.control, ttft.prime);
  const crossEffect = effectSize(ttft.cross, ttft.fresh);
  const controlSees = control.pValue < ALPHA;
  const crossSignal = cross.pValue < ALPHA;
  const findings = [
    ...(crossSignal
      ? [
          {
            what:
              `B's TTFT on A's prompts is lower than on fresh prompts: KS D+ ${cross.statistic.toFixed(2)}, ` +
              `p ${cross.pValue.toExponential(2)} (a prefix cache shared across tenants)`,
            requests: ids.cross,
          },
        ]
      : []),
    ...(cachedCross.length > 0
      ? [
          {
            what: `the server reported cached_tokens > 0 for ${cachedCross.length} of B's requests of A's prompts`,
            requests: cachedCross,
          },
        ]
      : []),
    ...oracle,
  ];
  const status = findings.length > 0 ? 'finding' : controlSees ? 'clean' : 'inconclusive';
  const fmt = (p: number) => (p < 1e-3 ? p.toExponential(1) : p.toFixed(3));
  return {
    status,
    summary:
      status === 'inconclusive'
        ? `positive control not significant (p ${fmt(control.pValue)}): this check cannot see a cache here; ` +
          `cross-tenant p ${fmt(cross.pValue)}`
        : `same-tenant control p ${fmt(control.pValue)} (median x${controlEffect.medianRatio.toFixed(2)}); ` +
          `cross-tenant p ${fmt(cross.pValue)} (median x${crossEffect.medianRatio.toFixed(2)})`,
    findings,
    figures: {
      promptTokens,
      samples,
      alpha: ALPHA,
      failed,
      firstFailure,
      control: { ...control, ...controlEffect, medianMs: median(ttft.control), baselineMedianMs: median(ttft.prime) },
      cross: { ...cross, ...crossEffect, medianMs: median(ttft.cross), baselineMedianMs: median(ttft.fresh) },
      cachedTokensOnCross: cachedCross,
      ttftMs: ttft,
      requests: ids,
    },
    plots: [
      {
        kind: 'ecdf',
        title: `TTFT of ${promptTokens}-token prompts (empirical CDFs)`,
        unit: 'ms',
        series: [
          { name: 'A fresh (prime)', values: ttft.prime },
          { name: 'A repeats A (control)', values: ttft.control },
          { name: 'B fresh', values: ttft.fresh },
          { name: 'B repeats A (cross-tenant)', values: ttft.cross },
        ],
      },
    ],
  };
}
