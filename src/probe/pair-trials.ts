// Prompts on several prefills, the design of two checks. prefill-timing, n trials:
//   1. primes: A sends fresh long prompts X_1..X_n, two at a time (behind a PD router with two or
//      more prefills, the two of a pair go to different prefills: A's pages end up on several)
//   2. settle: SETTLE_MS, so a prefix-aware router has polled where A's pages are
//   3. per trial i, in random order of i and of four arms, one request at a time:
//      cross:   B's X_i; fresh: B's fresh F_i (B's X_i goes where B's load sends it, the idle
//               cluster's first prefill: the one that holds A's pages for about half the X_i,
//               since the primes alternate; a hit there, or on another prefill through a peer
//               fetch keyed without the tenant, shows)
//      control: A's X_i (routed to its holder: a hit); baseline: A's fresh G_i
//      (Measured requests go alone: a pair's second request, or one whose partner runs beside
//      it, is slower for reasons of its own; the lone arms are alike but for the cache.)
// response-order, per trial: A primes X_i twice at once (on every prefill), then in random order
// B's pair as above and A's pair X_i (a hit wherever it lands) and a fresh G_i, launched the same
// way: does order show A's own hits (the control), and A's hits to B?
// On one node the pairs share its steps.
// Budget: 5 requests per trial (response-order: 6); trials = budget / 5 (12 to 40; response-order
// at least 20, and up to twice that, ten trials at a time, while its positive control is not yet
// significant: the stopping rule reads only A's pairs, so B's count is still tested once, at the
// end, at the stated level); prompts 0.4 of what the server admits; A's n primes
// must stay cached until their trial (n pages of promptTokens / pageSize on the prefills).
import { inParallel, usableTokens, type CheckContext } from './context.js';
import { randomIds, shuffle } from './prompts.js';
import type { RequestRecord, Tenant } from './types.js';

/** Trials for a budget: at least `least` (response-order: 20, so 1/2 against a near-certain order reaches p < 0.01). */
export function pairTrials(budget: number, least = 8): number {
  return Math.max(least, Math.min(40, Math.floor(budget / 5)));
}

/** Tokens of each prompt: 0.4 of what the server admits (the pairs' pages must stay cached until their trial). */
export function pairPromptTokens(usable: number, maxTokens: number): number {
  return Math.max(32, Math.floor((usable - maxTokens - 1) * 0.4));
}

export interface PairOutcome {
  /** TTFT of the request with A's prompt and of the fresh one; undefined when it failed. */
  readonly hitTtft: number | undefined;
  readonly freshTtft: number | undefined;
  readonly hitId: number;
  readonly freshId: number;
  /** Which finished first (the last byte of its response); 'tie' or 'failed' counts neither way. */
  readonly first: 'hit' | 'fresh' | 'tie' | 'failed';
  /** Whether the request with A's prompt was launched first. */
  readonly hitLaunchedFirst: boolean;
}

export interface Sample {
  readonly ttftMs: number;
  readonly id: number;
}

export interface PairData {
  readonly promptTokens: number;
  readonly settleMs: number;
  readonly maxTokens: number;
  /** Trials run (response-order: more than planned when its control asked for them). */
  trials: number;
  readonly primeTtft: number[];
  readonly cross: PairOutcome[];
  readonly control: PairOutcome[];
  /** prefill-timing: the measured request of each arm's pairs. */
  readonly timing: Record<'baseline' | 'control' | 'cross' | 'fresh', Sample[]>;
  readonly failed: number[];
}

/** Longer than a prefix-aware router's poll of its prefills (Tessera's: 1 s). */
export const SETTLE_MS = 2500;

const endOf = (r: RequestRecord): number => r.startMs + (r.totalMs ?? Infinity);
const ok = (r: RequestRecord): boolean => r.status === 200 && r.ttftMs !== undefined && r.error === undefined;

/** response-order's extension: trials added at a time, and the most trials in all as a multiple of those planned. */
export const ORDER_EXTEND_STEP = 10;
export const ORDER_EXTEND_MAX = 2;

/**
 * `controlDone` (order mode): whether A's pairs so far already show what the control must show; while
 * not, trials go on past those planned, ORDER_EXTEND_STEP at a time, up to ORDER_EXTEND_MAX times them.
 */
export async function runPairs(
  ctx: CheckContext,
  name: string,
  maxTokens: number,
  mode: 'timing' | 'order',
  controlDone?: (control: readonly PairOutcome[]) => boolean,
): Promise<PairData> {
  const { client, facts, rng } = ctx;
  const trials = pairTrials(ctx.budget, mode === 'order' ? 20 : 12);
  const promptTokens = pairPromptTokens(usableTokens(facts), maxTokens);
  let total = (mode === 'order' ? 6 : 5) * trials + 1;
  let done = 0;
  const data: PairData = {
    promptTokens,
    settleMs: SETTLE_MS,
    maxTokens,
    trials,
    primeTtft: [],
    cross: [],
    control: [],
    timing: { baseline: [], control: [], cross: [], fresh: [] },
    failed: [],
  };
  const send = async (tenant: Tenant, purpose: string, prompt: readonly number[]): Promise<RequestRecord> => {
    const r = await client.stream(tenant, `${name}: ${purpose}`, {
      model: facts.model,
      prompt: [...prompt],
      max_tokens: maxTokens,
      temperature: 0,
    });
    ctx.progress(++done, total);
    if (!ok(r)) data.failed.push(r.id);
    return r;
  };
  const pair = async (tenant: Tenant, x: readonly number[], arm: 'cross' | 'control'): Promise<PairOutcome> => {
    const hitFirst = rng.int(2) === 0;
    const fresh = randomIds(rng, promptTokens);
    const launch = [() => send(tenant, `${arm}: A's prompt`, x), () => send(tenant, `${arm}: fresh`, fresh)];
    const [a, b] = await inParallel(hitFirst ? launch : [launch[1]!, launch[0]!], 2);
    const [hit, other] = hitFirst ? [a!, b!] : [b!, a!];
    const first =
      !ok(hit) || !ok(other)
        ? 'failed'
        : endOf(hit) < endOf(other)
          ? 'hit'
          : endOf(hit) > endOf(other)
            ? 'fresh'
            : 'tie';
    return {
      hitTtft: ok(hit) ? hit.ttftMs : undefined,
      freshTtft: ok(other) ? other.ttftMs : undefined,
      hitId: hit.id,
      freshId: other.id,
      first,
      hitLaunchedFirst: hitFirst,
    };
  };
  await send('B', 'warm-up', randomIds(rng, promptTokens));
  data.failed.length = 0;
  if (mode === 'order') {
    // response-order: each X_i primed on every prefill (twice at once), just before its trial, so A's own X_i is a
    // hit wherever its pair puts it: the control asks only whether order shows a hit.
    for (let i = 0; i < data.trials; i++) {
      const x = randomIds(rng, promptTokens);
      for (const p of await Promise.all([send('A', 'prime', x), send('A', 'prime', x)]))
        if (ok(p)) data.primeTtft.push(p.ttftMs as number);
      for (const run of shuffle(rng, [
        async () => void data.cross.push(await pair('B', x, 'cross')),
        async () => void data.control.push(await pair('A', x, 'control')),
      ]))
        await run();
      const last = i + 1 === data.trials;
      if (last && data.trials < ORDER_EXTEND_MAX * trials && controlDone?.(data.control) === false) {
        data.trials += ORDER_EXTEND_STEP;
        total += 6 * ORDER_EXTEND_STEP;
      }
    }
    return data;
  }
  const xs = Array.from({ length: trials }, () => randomIds(rng, promptTokens));
  const primes = await inParallel(
    xs.map((x) => () => send('A', 'prime', x)),
    2,
  );
  for (const p of primes) if (ok(p)) data.primeTtft.push(p.ttftMs as number);
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  for (const i of shuffle(
    rng,
    xs.map((_, i) => i),
  )) {
    const x = xs[i] as number[];
    const measured = async (arm: keyof PairData['timing'], tenant: Tenant, prompt: readonly number[]) => {
      const r = await send(tenant, arm, prompt);
      if (ok(r)) data.timing[arm].push({ ttftMs: r.ttftMs as number, id: r.id });
    };
    for (const run of shuffle(rng, [
      () => measured('cross', 'B', x),
      () => measured('fresh', 'B', randomIds(rng, promptTokens)),
      () => measured('control', 'A', x),
      () => measured('baseline', 'A', randomIds(rng, promptTokens)),
    ]))
      await run();
  }
  return data;
}
