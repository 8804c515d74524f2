// Seeded simulation of the scheduler on a tiny pool (11 pages of 4 slots) with a fake runner that
// does to the pool what the real runner does (checkRead, checkWrite, write, stamp) and checks by
// content that every position a request reads holds its own token for its own tenant.
// Random arrivals (short and long prompts over shared prefixes, some too long), aborts in every
// state (also while the request's step runs), stop strings, and per role: held prefill pages
// released late, decode transfers that arrive late or cover only part of the prompt, quarantines.
// After every step: scheduler integrity (which includes the ledger's and the prefix cache's).
// At the end: every request ended, no page check ever failed, nothing read another's data, and
// once idle every page is free or cached. A failing seed reproduces exactly.
import { describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS, Rng, type RequestId, type Tag } from '../../src/core/index.js';
import { DEFAULT_SPEC, type Role, type SchedulerEvent } from '../../src/scheduler/index.js';
import { SchedulerHarness } from './scheduler-runner.js';

const NUM_PAGES = 11;
const PAGE_SIZE = 4;
const TENANTS = ['t0', 't1', 't2'];
const PREFIXES: readonly (readonly number[])[] = [
  [],
  [7, 7, 7, 7],
  [7, 7, 7, 7, 8, 8, 8, 8],
  [9, 9, 9, 9, 9, 9, 9, 9, 9],
];
const VOCAB = 40;

interface SimOptions {
  readonly role: Role;
  /** Prompt-lookup speculation for decodes (drafts verified by the fake model, rejected ones rolled back). */
  readonly speculation?: boolean;
  readonly seed: number;
  readonly numSteps: number;
  readonly faults?: FaultSet;
  readonly cache?: boolean;
}

interface Stats {
  admitted: number;
  rejected: Record<string, number>;
  finished: number;
  /** Failures other than the transfers this sim cut short on purpose. */
  unexpectedFailures: string[];
  placeholderTransfers: number;
  aborted: Record<string, number>;
  abortedInFlight: number;
  preempted: number;
  cacheHits: number;
  steps: number;
  items: number;
  tokens: number;
  /** Speculation: draft tokens verified and accepted. */
  drafted: number;
  accepted: number;
}

/** Things that happen later: a transfer landing, an Ack, an AbortAck. */
type Due = { readonly at: number; readonly kind: 'transfer' | 'release'; readonly rid: RequestId };

function simulate(o: SimOptions): Stats {
  const rng = new Rng(o.seed);
  const h = new SchedulerHarness({
    role: o.role,
    numPages: NUM_PAGES,
    pageSize: PAGE_SIZE,
    contextLength: 48, // more than the pool's 44 tokens: admission's pool rule has work to do
    maxRunningRequests: 4,
    chunkedPrefillSize: 8,
    maxWaiting: 12,
    cache: o.cache ?? true,
    faults: o.faults ?? NO_FAULTS,
    vocabSize: VOCAB,
    seed: o.seed,
    ...(o.speculation === true ? { speculation: { ...DEFAULT_SPEC, maxBatch: 4, minNgram: 1, minAcceptance: 0 } } : {}),
  });
  const s = h.scheduler;
  const stats: Stats = {
    admitted: 0,
    rejected: {},
    finished: 0,
    unexpectedFailures: [],
    placeholderTransfers: 0,
    aborted: {},
    abortedInFlight: 0,
    preempted: 0,
    cacheHits: 0,
    steps: 0,
    items: 0,
    tokens: 0,
    drafted: 0,
    accepted: 0,
  };
  const live = new Set<RequestId>();
  const prompts = new Map<RequestId, { tenant: string; prompt: number[]; tags: readonly Tag[] }>();
  const cutShort = new Set<RequestId>();
  const stoppedByCaller = new Set<RequestId>();
  let due: Due[] = [];
  let next = 0;

  const onEvents = (events: readonly SchedulerEvent[]): void => {
    h.record(events);
    for (const e of events) {
      switch (e.kind) {
        case 'token':
          break;
        case 'finished':
          stats.finished++;
          if (e.usage.cachedTokens > 0) stats.cacheHits++;
          live.delete(e.rid);
          break;
        case 'failed':
          // A decode node fails the request it would preempt (it cannot recompute): expected there.
          if (o.role === 'decode' && e.error.code === 'overloaded' && /would have had to preempt/.test(e.error.message))
            stats.preempted++;
          else if (!cutShort.has(e.rid)) stats.unexpectedFailures.push(`${e.rid}: ${e.error.message}`);
          live.delete(e.rid);
          break;
        case 'prefilled':
          due.push({ at: stats.steps + 1 + rng.int(6), kind: 'release', rid: e.rid });
          break;
        default:
          throw new Error('unknown event');
      }
    }
  };

  const arrive = (): void => {
    const rid = `r${next++}` as RequestId;
    const tenant = rng.pick(TENANTS);
    const long = rng.chance(0.3);
    const prompt = [
      ...rng.pick(PREFIXES),
      ...Array.from({ length: long ? 15 + rng.int(30) : 1 + rng.int(6) }, () => 10 + rng.int(VOCAB - 10)),
    ];
    const maxTokens = 1 + rng.int(long ? 12 : 20);
    const stopTokenIds = rng.chance(0.3) ? [rng.int(VOCAB)] : [];
    const epochBefore = h.pool.ledger.lastEpoch;
    const result =
      o.role === 'decode'
        ? s.reserve(h.request(rid, tenant, prompt, maxTokens, { stopTokenIds }))
        : h.admit(rid, tenant, prompt, maxTokens, { stopTokenIds });
    if (result.kind === 'rejected') {
      stats.rejected[result.error.code] = (stats.rejected[result.error.code] ?? 0) + 1;
      expect(h.pool.ledger.lastEpoch, `seed ${o.seed}: a refused request allocated pages`).toBe(epochBefore);
      return;
    }
    stats.admitted++;
    live.add(rid);
    prompts.set(rid, { tenant, prompt, tags: result.kind === 'reserved' ? result.tags : [] });
    if (o.role === 'decode') due.push({ at: stats.steps + rng.int(5), kind: 'transfer', rid });
  };

  const land = (d: Due): void => {
    if (d.kind === 'release') {
      s.release(d.rid);
      live.delete(d.rid); // a quarantine or a held prefill: either way the request is over
      return;
    }
    if (s.view(d.rid)?.state !== 'receiving') return; // aborted meanwhile
    const { tenant, prompt, tags } = prompts.get(d.rid)!;
    const placeholder = rng.chance(0.05) && prompt.length > PAGE_SIZE;
    if (placeholder) {
      stats.placeholderTransfers++;
      cutShort.add(d.rid);
    }
    h.transfer(d.rid, tenant, tags, prompt, placeholder ? PAGE_SIZE : prompt.length);
    const first = h.runner.sample(d.rid, prompt.length);
    const started = s.startDecode(d.rid, first);
    h.known.get(d.rid)?.push(first); // the first token gets no event: the DecodeMachine sends it
    if (started.kind === 'started') onEvents(started.events);
  };

  const abortSome = (inFlight: boolean): void => {
    const rids = [...live].filter((r) => s.view(r) !== undefined);
    if (rids.length === 0) return;
    const rid = rng.pick(rids);
    const state = s.view(rid)?.state;
    const peer = state === 'receiving' ? 'peer-may-write' : 'no-peer-writes';
    const result = s.abort(rid, peer);
    if (result.kind === 'not-found') return;
    stats.aborted[result.was] = (stats.aborted[result.was] ?? 0) + 1;
    if (inFlight && result.pages === 'after-step') stats.abortedInFlight++;
    if (result.pages === 'after-peer') due.push({ at: stats.steps + 1 + rng.int(8), kind: 'release', rid });
    else live.delete(rid);
  };

  const started = new Set<RequestId>();
  const step = (arrivals: boolean): void => {
    if (arrivals && rng.chance(0.5)) for (let i = rng.int(3); i >= 0; i--) arrive();
    const now = due.filter((d) => d.at <= stats.steps);
    due = due.filter((d) => d.at > stats.steps);
    for (const d of now) land(d);
    if (arrivals && rng.chance(0.04)) abortSome(false);
    if (rng.chance(0.02)) {
      const decoding = [...live].filter((r) => s.view(r)?.state === 'decoding');
      if (decoding.length > 0) {
        const rid = rng.pick(decoding);
        stoppedByCaller.add(rid);
        const result = s.finish(rid, 'stop');
        if (result.kind === 'finished') onEvents([result.event]);
      }
    }
    const plan = s.schedule();
    s.checkIntegrity();
    onEvents(plan.events);
    stats.preempted += plan.preempted.length;
    if (arrivals && plan.items.length > 0 && rng.chance(0.05)) abortSome(true);
    if (plan.items.length > 0) {
      stats.items += plan.items.length;
      for (const item of plan.items) {
        if (o.role === 'prefill' && !started.has(item.rid) && item.startPos > 0) stats.cacheHits++;
        started.add(item.rid);
      }
      stats.tokens += plan.items.reduce((n, i) => n + i.tokens.length, 0);
      onEvents(s.complete(h.run(plan.items))); // the runner, then speculation's rollback
    }
    s.checkIntegrity();
    stats.steps++;
  };

  for (let i = 0; i < o.numSteps; i++) step(true);
  for (let i = 0; i < 2000 && !(s.isIdle && due.length === 0); i++) step(false);

  // Every request ended, and nothing is left holding a page.
  expect(live.size, `seed ${o.seed}: requests never ended: ${[...live].slice(0, 5).join(', ')}`).toBe(0);
  expect(s.isIdle).toBe(true);
  const counts = h.pool.ledger.counts();
  expect(counts.allocated + counts.quarantined, `seed ${o.seed}: pages left held once idle`).toBe(0);
  expect(counts.free + counts.cached).toBe(NUM_PAGES);
  expect(h.runner.numPageCheckFailures, `seed ${o.seed}: a page check failed`).toBe(0);
  expect(h.runner.contentViolations, `seed ${o.seed}`).toEqual([]);
  // Outputs are the model's, position by position: recomputation never changed or repeated a token.
  for (const [rid, e] of h.ended) {
    if (e.kind !== 'finished' || stoppedByCaller.has(rid)) continue;
    const numPrompt = prompts.get(rid)!.prompt.length;
    const output = (h.known.get(rid) ?? []).slice(numPrompt);
    expect(output, `seed ${o.seed}: ${rid}`).toEqual(output.map((_, i) => h.runner.sample(rid, numPrompt + i)));
  }
  stats.items = h.runner.numItems;
  stats.drafted = h.runner.numDrafted;
  stats.accepted = h.runner.numAccepted;
  return stats;
}

const SEEDS = [1, 2, 3, 4, 5];
const STEPS = 3000;

describe('scheduler simulation (11 pages of 4 slots)', () => {
  for (const role of ['colocated', 'prefill', 'decode'] as const) {
    it(`${role}: ${SEEDS.length} seeds x ${STEPS} steps of random arrivals and aborts end cleanly`, () => {
      const totals: Record<string, number> = {};
      for (const seed of SEEDS) {
        const stats = simulate({ role, seed, numSteps: STEPS });
        expect(stats.unexpectedFailures, `seed ${seed}`).toEqual([]);
        expect(stats.admitted).toBeGreaterThan(100);
        for (const key of [
          'admitted',
          'finished',
          'preempted',
          'cacheHits',
          'abortedInFlight',
          'placeholderTransfers',
          'steps',
          'tokens',
        ] as const) {
          totals[key] = (totals[key] ?? 0) + stats[key];
        }
        for (const [code, n] of Object.entries(stats.rejected))
          totals[`rejected:${code}`] = (totals[`rejected:${code}`] ?? 0) + n;
        for (const [state, n] of Object.entries(stats.aborted))
          totals[`aborted:${state}`] = (totals[`aborted:${state}`] ?? 0) + n;
      }
      console.log(`scheduler sim ${role}: ${JSON.stringify(totals)}`);
      // The simulation exercises what it claims to.
      expect(totals['preempted']).toBeGreaterThan(0);
      // A decode node never recomputes, so it never meets its own cached pages again.
      if (role === 'decode') expect(totals['cacheHits']).toBe(0);
      else expect(totals['cacheHits']).toBeGreaterThan(0);
      expect(totals['abortedInFlight']).toBeGreaterThan(0);
      expect(totals['rejected:pool_too_small'] ?? 0).toBeGreaterThan(0);
      if (role === 'decode') expect(totals['placeholderTransfers']).toBeGreaterThan(0);
      if (role === 'decode') expect(totals['aborted:receiving']).toBeGreaterThan(0);
      if (role === 'prefill') expect(totals['aborted:held']).toBeGreaterThan(0);
    });
  }

  for (const role of ['colocated', 'decode'] as const) {
    it(`${role} with speculation: drafts verified and rejected ones rolled back every step; every read is the request's own`, () => {
      let numDrafted = 0;
      let numAccepted = 0;
      for (const seed of SEEDS.slice(0, 3)) {
        const stats = simulate({ role, seed, numSteps: 1500, speculation: true });
        expect(stats.unexpectedFailures, `seed ${seed}`).toEqual([]);
        numDrafted += stats.drafted;
        numAccepted += stats.accepted;
      }
      console.log(`scheduler sim ${role} with speculation: drafted ${numDrafted}, accepted ${numAccepted}`);
      expect(numDrafted).toBeGreaterThan(numAccepted);
      expect(numAccepted).toBeGreaterThan(0);
    });
  }

  it('negative control: with keep-rejected-stamps, the integrity check finds a rejected position still stamped', () => {
    expect(() =>
      simulate({
        role: 'colocated',
        seed: 1,
        numSteps: 1500,
        speculation: true,
        faults: new FaultSet(['keep-rejected-stamps']),
      }),
    ).toThrow(/its stamp covers more/);
  });

  it('negative control: with skip-admission, requests that can never fit are admitted and fail late', () => {
    const stats = simulate({ role: 'colocated', seed: 1, numSteps: 1000, faults: new FaultSet(['skip-admission']) });
    expect(stats.rejected['pool_too_small'] ?? 0).toBe(0);
    expect(stats.unexpectedFailures.length).toBeGreaterThan(0);
  });

  it('negative control: with share-prefix-across-tenants, the first cross-tenant cache hit is refused by the ledger', () => {
    expect(() =>
      simulate({ role: 'colocated', seed: 1, numSteps: 1000, faults: new FaultSet(['share-prefix-across-tenants']) }),
    ).toThrow(/is not cached for tenant/);
  });
});
