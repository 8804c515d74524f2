// disk-timing: after tenant A's prefix was pushed out of the KV pool (it lives only in a tier
// below, e.g. Tessera's --kv-disk), can tenant B tell from TTFT that A sent it (a tier keyed
// without the tenant: SGLang's HiCache, LMCache without the salt)?
//   1. prime:   A sends fresh long prompts X_1..X_n, each twice at once (behind a PD router the
//               two go to different prefills, so each prefill's tier gets it); not measured
//   2. evict:   fresh prompts of evictTokens tokens in all (A's and B's), two at a time (spread
//               over the prefills), so the pools' caches must evict the X_i (to a tier, if any)
//   3. measure: per i, in random order of i and of the arms:
//        cross:   B sends X_i               -> compared with B's fresh prompts (cross-tenant)
//        control: A sends X_i again         -> compared with A's fresh prompts: the positive
//                 control, a hit in the tier below the pool (a server without one, or a fill too
//                 small to evict, shows up here: no hit, or one in the pool; see --evict-tokens)
//        fresh:   B sends a fresh prompt F_i;  baseline: A sends a fresh prompt G_i (same length)
// One-sided KS tests, alpha 0.01 (timing-verdict.ts).
// Budget: 6 requests per sample plus the fill; samples = budget / 6 (10 to 24). The fill is
// evictTokens / promptTokens requests (default evictTokens: 4x the pool limit the probe learned,
// else 16x the context).
import { inParallel, usableTokens, type CheckContext, type CheckOutput } from './context.js';
import { randomIds, shuffle } from './prompts.js';
import { timingArms, timingVerdict, type TimingArm } from './timing-verdict.js';
import type { Tenant } from './types.js';

export function diskTimingSamples(budget: number): number {
  return Math.max(10, Math.min(24, Math.floor(budget / 6)));
}

export function diskPromptTokens(usable: number): number {
  return Math.max(32, Math.floor((usable - 2) * 0.625));
}

/** Tokens of fresh prompts sent between the primes and the measurements. */
export function evictTokensFor(ctx: Pick<CheckContext, 'facts' | 'evictTokens'>): number {
  if (ctx.evictTokens !== undefined) return ctx.evictTokens;
  return ctx.facts.poolLimit !== null ? 4 * ctx.facts.poolLimit : 16 * ctx.facts.contextLength;
}

function fillRequests(ctx: Pick<CheckContext, 'facts' | 'evictTokens'>): number {
  return Math.ceil(evictTokensFor(ctx) / diskPromptTokens(usableTokens(ctx.facts)));
}

export function diskTimingBudget(budget: number, ctx: Pick<CheckContext, 'facts' | 'evictTokens'>): number {
  return 6 * diskTimingSamples(budget) + 1 + fillRequests(ctx);
}

export async function diskTiming(ctx: CheckContext): Promise<CheckOutput> {
  const { client, facts, rng } = ctx;
  const samples = diskTimingSamples(ctx.budget);
  const promptTokens = diskPromptTokens(usableTokens(facts));
  const numFill = fillRequests(ctx);
  const total = diskTimingBudget(ctx.budget, ctx);
  const arms = timingArms();
  let done = 0;
  const send = async (
    arm: TimingArm | 'warm-up' | 'prime',
    tenant: Tenant,
    prompt: readonly number[],
  ): Promise<void> => {
    const r = await client.stream(tenant, `disk-timing: ${arm}`, {
      model: facts.model,
      prompt: [...prompt],
      max_tokens: 1,
      temperature: 0,
    });
    ctx.progress(++done, total);
    if (arm === 'warm-up' || arm === 'prime') return;
    if (r.status !== 200 || r.ttftMs === undefined) {
      arms.failed.push(r.id);
      return;
    }
    arms.ttftMs[arm].push(r.ttftMs);
    arms.ids[arm].push(r.id);
  };
  await send('warm-up', 'B', randomIds(rng, promptTokens));
  const primes = Array.from({ length: samples }, () => randomIds(rng, promptTokens));
  for (const x of primes) await Promise.all([send('prime', 'A', x), send('prime', 'A', x)]);
  const fillStarted = performance.now();
  let fillFailed = 0;
  await inParallel(
    Array.from({ length: numFill }, (_, i) => async () => {
      const tenant: Tenant = i % 2 === 0 ? 'A' : 'B';
      const r = await client.complete(tenant, 'disk-timing: evict (fill the pool)', {
        model: facts.model,
        prompt: randomIds(rng, promptTokens),
        max_tokens: 1,
        temperature: 0,
      });
      if (r.status !== 200) fillFailed++;
      ctx.progress(++done, total);
    }),
    2,
  );
  const fillMs = performance.now() - fillStarted;
  for (const i of shuffle(
    rng,
    primes.map((_, i) => i),
  )) {
    const x = primes[i] as number[];
    for (const arm of shuffle(rng, [
      () => send('cross', 'B', x),
      () => send('control', 'A', x),
      () => send('fresh', 'B', randomIds(rng, promptTokens)),
      () => send('baseline', 'A', randomIds(rng, promptTokens)),
    ]))
      await arm();
  }
  return timingVerdict(
    arms,
    {
      cache: 'evicted-prefix',
      leak: '(a tier below the pool keyed without the tenant)',
      series: {
        baseline: 'A fresh',
        control: 'A repeats after eviction (control)',
        fresh: 'B fresh',
        cross: "B repeats A's evicted prompt (cross-tenant)",
      },
      plotTitle: `TTFT of ${promptTokens}-token prompts after ${evictTokensFor(ctx)} tokens of eviction (empirical CDFs)`,
    },
    {
      figures: {
        samples,
        promptTokens,
        evictTokens: evictTokensFor(ctx),
        fillRequests: numFill,
        fillFailed,
        fillMs: Math.round(fillMs),
      },
    },
  );
}
