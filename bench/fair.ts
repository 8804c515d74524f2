// Fair sharing benchmark (`npm run bench:fair`): does one tenant's flood of long prompts hold
// another tenant's short requests back? A real `tessera serve` on gen-model's m100 (q4_0 GGUF at
// /tmp/m100.gguf, generated once) with two API keys. Tenant B sends short streaming chat requests
// one after another, alone, then while tenant A keeps 24 long prompts (400 words, 64 tokens) in
// flight; `--rounds` times in turn on one server, so the machine's load (shared machines) weighs
// on both sides alike. B's time to first token (p50/p99) both ways and their ratios are printed
// per round and over all rounds, with A's completion tokens per second beside B, for up to six
// servers in one run (all up at once, the rounds taking turns between them): the scheduler as it
// is; `before`, with TESSERA_FAULT=split-short-prompts,unbounded-shared-steps (B's short prompt
// split by the step budget, A's steps without decodes whole 256-token chunks: the scheduler
// before both rules); `split` and `unbounded`, one fault each; `crowded`, TESSERA_FAULT=crowded-
// first-token-step (the step that gives B its first token fills with A's chunks to the step
// budget); `loose`, TESSERA_FAULT=loose-shared-budget (steps keep the lone tenant's budget while
// B shares the node: the default before defence 58); `closes`, TESSERA_FAULT=budget-closes-
// admission (A's long head, out of time in the step, stops B's start too: defence 59 off);
// `window`, TESSERA_FAULT=plan-count-shared-window (the shared window after B's last request is
// 16 plans only, not also a second of steps: on a prefill worker it closed between B's requests);
// `fcfs`, TESSERA_FAULT=no-tenant-fairness (first come first served). Default: fair, loose,
// before, fcfs.
// A's throughput is measured twice per round: beside B (while B is measured) and alone (A's
// flood for `--a-alone-ms`, 4000 by default, after B's window of shared steps has passed), so a
// cost of the shared budget to A shows where it is paid and where it must not be.
// The load average is printed at the start and the end.
// `--target up`: the same measurement through a cluster, `tessera up` (a router, one prefill and
// one decode worker, each its own process) with the same two keys checked by the router; the
// fault reaches every process (the router's wait queue and both workers' schedulers). The
// engine-loop counters are a worker's, so only B's wait (the router's /metrics) is printed then.
// A benchmark, not a test: it asserts nothing about speed. The target (issue 33): B's p99 with
// A's flood within 2x of B's p99 alone.
//
//   node --import ./bench/lib/register-ts.mjs bench/fair.ts [--samples 40] [--flood 24] [--rounds 3]
//        [--max-step-ms auto|off|MS] [--a-alone-ms 4000] [--only fair,loose,closes,window,before,split,unbounded,crowded,fcfs]
//        [--breakdown (target up: B's TTFT split by hop from the cluster's protocol trace; bench/lib/fair-breakdown.ts)]
//        [--target serve|up] [--server-args '--chunked-prefill-size 64 ...' (more flags for serve or up)]
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Rng } from '../src/core/index.js';
import { breakdownLines, type BRequest } from './lib/fair-breakdown.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const SAMPLES = Number(flag('--samples') ?? 40);
const FLOOD = Number(flag('--flood') ?? 24);
const MAX_STEP_MS = flag('--max-step-ms');
const ONLY = flag('--only');
const ROUNDS = Number(flag('--rounds') ?? 3);
const A_ALONE_MS = Number(flag('--a-alone-ms') ?? 4000);
const TARGET = flag('--target') ?? 'serve';
const SERVER_ARGS = (flag('--server-args') ?? '').split(' ').filter((a) => a !== '');
if (TARGET !== 'serve' && TARGET !== 'up') throw new Error(`--target: serve or up, not ${TARGET}`);
/** --breakdown (target up): every process traces the protocol (TESSERA_TRACE_DIR), and B's TTFT is split by hop. */
const BREAKDOWN = args.includes('--breakdown');
if (BREAKDOWN && TARGET !== 'up') throw new Error('--breakdown is for --target up');
const MODEL = '/tmp/m100.gguf';
const KEY_A = 'sk-bench-fair-alice';
const KEY_B = 'sk-bench-fair-bob';
const ADMIN_KEY = 'sk-bench-fair-admin';

function ensureModel(): void {
  if (existsSync(MODEL)) return;
  process.stderr.write(`generating ${MODEL} ...\n`);
  execFileSync(
    process.execPath,
    ['bin/tessera.js', 'gen-model', '--preset', 'm100', '--format', 'gguf', '--dtype', 'q4_0', '--out', MODEL],
    { stdio: 'inherit' },
  );
}

async function startServer(
  keysFile: string,
  faults: string | undefined,
  traceDir: string | undefined,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      'bin/tessera.js',
      TARGET,
      '--model',
      MODEL,
      '--served-model-name',
      'm100',
      '--port',
      '0',
      '--api-keys',
      keysFile,
      '--admin-key',
      ADMIN_KEY,
      ...(MAX_STEP_MS === undefined ? [] : ['--max-step-ms', MAX_STEP_MS]),
      ...SERVER_ARGS,
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        ...(faults === undefined ? {} : { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: faults }),
        ...(traceDir === undefined ? {} : { TESSERA_TRACE_DIR: traceDir }),
      },
    },
  );
  let out = '';
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the server exited with code ${code} before listening`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      // `up` forwards its workers' lines: its own says `tessera: listening on` once the router is ready.
      const url = (
        TARGET === 'up' ? /^tessera: listening on (http:\/\/[\d.]+:\d+)/m : /listening on (http:\/\/[\d.]+:\d+)/
      ).exec(out)?.[1];
      if (url !== undefined) resolve({ url, child });
    });
  });
}

const WORDS =
  'the quick brown fox jumps over a lazy dog while seven silver ships sail past quiet harbours under grey morning skies and old sailors count their nets'.split(
    ' ',
  );
function words(rng: Rng, n: number): string {
  return Array.from({ length: n }, () => rng.pick(WORDS)).join(' ');
}

/** One streaming chat request; ms from the call to its first content chunk. */
async function ttftOf(client: OpenAI, prompt: string, maxTokens: number, signal?: AbortSignal): Promise<number> {
  const start = performance.now();
  const stream = await client.chat.completions.create(
    { model: 'm100', messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, stream: true },
    signal === undefined ? {} : { signal },
  );
  let first: number | undefined;
  for await (const chunk of stream) {
    if (first === undefined && (chunk.choices[0]?.delta.content ?? '') !== '') first = performance.now();
  }
  return (first ?? performance.now()) - start;
}

function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (rank - lo);
}

/** The engine loop's counters (the admin-only /dashboard/state), to tell what a step costs. */
interface Loop {
  readonly numSteps: number;
  readonly stepMsTotal: number;
  readonly numItemsStepped: number;
}

async function loopOf(url: string): Promise<Loop> {
  const r = await fetch(`${url}/dashboard/state`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  const view = (await r.json()) as { map: { loop?: Loop } };
  return view.map.loop ?? { numSteps: 0, stepMsTotal: 0, numItemsStepped: 0 };
}

/** B's mean time from the back end's handoff to its first token (/metrics, tessera_tenant_queue_seconds). */
async function queueMsOf(url: string): Promise<{ readonly sum: number; readonly count: number }> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).text();
  const value = (series: string): number =>
    Number(
      text
        .split('\n')
        .find((l) => l.startsWith(`${series} `))
        ?.split(' ')[1] ?? 0,
    );
  return {
    sum: value('tessera_tenant_queue_seconds_sum{tenant="bob"}') * 1000,
    count: value('tessera_tenant_queue_seconds_count{tenant="bob"}'),
  };
}

interface Phase {
  /** B's TTFTs (ms). */
  readonly ttfts: readonly number[];
  readonly wallMs: number;
  /** The engine loop's steps, their summed ms and items, while B was measured. */
  readonly numSteps: number;
  readonly stepMs: number;
  readonly numItems: number;
  /** B's summed server-side queue time (handoff to first token, ms) and its count. */
  readonly queueMs: number;
  readonly numQueued: number;
}

async function phase(url: string, run: () => Promise<number[]>): Promise<Phase> {
  const [loop0, queue0] = [await loopOf(url), await queueMsOf(url)];
  const startMs = performance.now();
  const ttfts = await run();
  const wallMs = performance.now() - startMs;
  const [loop1, queue1] = [await loopOf(url), await queueMsOf(url)];
  return {
    ttfts,
    wallMs,
    numSteps: loop1.numSteps - loop0.numSteps,
    stepMs: loop1.stepMsTotal - loop0.stepMsTotal,
    numItems: loop1.numItemsStepped - loop0.numItemsStepped,
    queueMs: queue1.sum - queue0.sum,
    numQueued: queue1.count - queue0.count,
  };
}

/** B's short requests, one after another (two warm-ups first, not counted); their TTFTs. */
async function tenantB(client: OpenAI, rng: Rng, record?: { list: BRequest[]; beside: boolean }): Promise<number[]> {
  const ttfts: number[] = [];
  for (let i = 0; i < SAMPLES + 2; i++) {
    const startMs = performance.timeOrigin + performance.now();
    const ms = await ttftOf(client, `question ${i}: ${words(rng, 8)}`, 8);
    if (i >= 2) ttfts.push(ms);
    if (i >= 2) record?.list.push({ startMs, firstMs: startMs + ms, beside: record.beside });
  }
  return ttfts;
}

/**
 * A keeps FLOOD long prompts in flight until `stop` aborts. `started` resolves in the steady
 * state: every slot sent, a second passed, and A's first request finished (so A decodes beside
 * its prefills). The flood's first steps, whole 256-token chunks before anything of A decodes,
 * took about 0.3 s on an idle machine (inside the second) but 1-3 s each on a loaded one, where
 * they fell into B's measured requests under any scheduler.
 */
function floodA(client: OpenAI, rng: Rng, stop: AbortController): { started: Promise<void>; done: Promise<number> } {
  let numServed = 0;
  let numStarted = 0;
  let waited = false;
  let markStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const slot = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      const ttft = ttftOf(client, words(rng, 400), 64, stop.signal);
      if (++numStarted === FLOOD) {
        setTimeout(() => {
          waited = true;
          if (numServed > 0) markStarted();
        }, 1000);
      }
      try {
        await ttft;
        if (++numServed === 1 && waited) markStarted();
      } catch (error) {
        if (!stop.signal.aborted) throw error;
      }
    }
  };
  const done = Promise.all(Array.from({ length: FLOOD }, slot)).then(() => numServed);
  return { started, done };
}

/** Phases summed over rounds. */
const joined = (ps: readonly Phase[]): Phase => ({
  ttfts: ps.flatMap((p) => p.ttfts),
  wallMs: ps.reduce((s, p) => s + p.wallMs, 0),
  numSteps: ps.reduce((s, p) => s + p.numSteps, 0),
  stepMs: ps.reduce((s, p) => s + p.stepMs, 0),
  numItems: ps.reduce((s, p) => s + p.numItems, 0),
  queueMs: ps.reduce((s, p) => s + p.queueMs, 0),
  numQueued: ps.reduce((s, p) => s + p.numQueued, 0),
});

interface Result {
  readonly rounds: { readonly alone: Phase; readonly flood: Phase }[];
  /** A's completion tokens generated while B was measured beside them, and the ms of those phases. */
  aTokens: number;
  aMs: number;
  /** A's completion tokens and ms with B idle (its shared window passed). */
  aAloneTokens: number;
  aAloneMs: number;
}

/** One server under test and its clients. */
interface Subject {
  readonly url: string;
  readonly child: ChildProcess;
  readonly a: OpenAI;
  readonly b: OpenAI;
  readonly rng: Rng;
  readonly result: Result;
  /** --breakdown: the cluster's trace directory and B's requests (epoch ms). */
  readonly traceDir: string | undefined;
  readonly bRequests: BRequest[];
}

async function subjectOf(mode: Mode, keysFile: string): Promise<Subject> {
  const traceDir = BREAKDOWN ? mkdtempSync(join(tmpdir(), `tessera-bench-fair-trace-${mode}-`)) : undefined;
  const { url, child } = await startServer(keysFile, MODES[mode].fault, traceDir);
  const opts = { baseURL: `${url}/v1`, maxRetries: 0, timeout: 600_000 };
  return {
    url,
    child,
    a: new OpenAI({ ...opts, apiKey: KEY_A }),
    b: new OpenAI({ ...opts, apiKey: KEY_B }),
    rng: new Rng(33),
    result: { rounds: [], aTokens: 0, aMs: 0, aAloneTokens: 0, aAloneMs: 0 },
    traceDir,
    bRequests: [],
  };
}

/** One round on one server: B alone, then B beside A's flood (started for the round, stopped after it). */
async function round(s: Subject): Promise<void> {
  const alone = await phase(s.url, () => tenantB(s.b, s.rng, { list: s.bRequests, beside: false }));
  const stop = new AbortController();
  setMaxListeners(0, stop.signal); // the openai client adds listeners per A request (and per retry of its body)
  const flood = floodA(s.a, s.rng, stop);
  await flood.started;
  // A alone: B's last request ended at least 500 ms ago (its 16 shared plans are long past).
  await new Promise((resolve) => setTimeout(resolve, 500));
  const aloneBefore = await aTokensSoFar(s.url);
  const aloneStart = performance.now();
  await new Promise((resolve) => setTimeout(resolve, A_ALONE_MS));
  s.result.aAloneTokens += (await aTokensSoFar(s.url)) - aloneBefore;
  s.result.aAloneMs += performance.now() - aloneStart;
  const tokensBefore = await aTokensSoFar(s.url);
  const withFlood = await phase(s.url, () => tenantB(s.b, s.rng, { list: s.bRequests, beside: true }));
  s.result.aTokens += (await aTokensSoFar(s.url)) - tokensBefore;
  s.result.aMs += withFlood.wallMs;
  stop.abort();
  await flood.done;
  s.result.rounds.push({ alone, flood: withFlood });
}

/** Tenant A's completion tokens so far (/metrics, tessera_tenant_tokens_total). */
async function aTokensSoFar(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('tessera_tenant_tokens_total{tenant="alice",kind="completion"}'));
  return Number(line?.split(' ')[1] ?? 0);
}

type Mode = 'fair' | 'loose' | 'closes' | 'window' | 'before' | 'split' | 'unbounded' | 'crowded' | 'fcfs';
const MODES: Record<Mode, { readonly name: string; readonly fault: string | undefined }> = {
  fair: { name: 'fair (as it is)', fault: undefined },
  loose: { name: 'fair, loose-shared-budget', fault: 'loose-shared-budget' },
  closes: { name: 'fair, budget-closes-admission', fault: 'budget-closes-admission' },
  window: { name: 'fair, plan-count-shared-window', fault: 'plan-count-shared-window' },
  before: { name: 'fair, both faults (before)', fault: 'split-short-prompts,unbounded-shared-steps' },
  split: { name: 'fair, split-short-prompts', fault: 'split-short-prompts' },
  unbounded: { name: 'fair, unbounded-shared-steps', fault: 'unbounded-shared-steps' },
  crowded: { name: 'fair, crowded-first-token-step', fault: 'crowded-first-token-step' },
  fcfs: { name: 'FCFS (no-tenant-fairness)', fault: 'no-tenant-fairness' },
};
/** What runs without --only: the scheduler as it is, without the shared budget, before defences 47-48, and first come first served. */
const DEFAULT_MODES: readonly Mode[] = ['fair', 'loose', 'before', 'fcfs'];

async function main(): Promise<void> {
  ensureModel();
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-fair-'));
  const keysFile = join(dir, 'keys.json');
  writeFileSync(keysFile, JSON.stringify({ [KEY_A]: 'alice', [KEY_B]: 'bob' }));
  const modes = ONLY === undefined ? DEFAULT_MODES : (ONLY.split(',') as Mode[]).filter((m) => m in MODES);
  const f = (ms: number): string => ms.toFixed(0).padStart(5);
  const load = (): string =>
    loadavg()
      .map((x) => x.toFixed(2))
      .join(' ');
  console.log(
    `bench:fair  m100 q4_0, tenant B: ${SAMPLES} short streaming chats (8 tokens) one after another; ` +
      `tenant A: ${FLOOD} long prompts (400 words, 64 tokens) in flight; ${ROUNDS} rounds of (B alone, B beside A) ` +
      `per scheduler; target ${TARGET === 'up' ? 'up (router, prefill, decode: separate processes)' : 'serve'}; ` +
      `--max-step-ms ${MAX_STEP_MS ?? 'auto'}${SERVER_ARGS.length > 0 ? `, ${SERVER_ARGS.join(' ')}` : ''}; ` +
      `${cpus().length} CPUs, load average ${load()}`,
  );
  console.log(
    'scheduler                      round   B alone p50/p99 ms   B beside A p50/p99 ms   p50 ratio  p99 ratio   A tok/s beside B / alone',
  );
  const details: string[] = [];
  // Every server is up at once (idle ones cost nothing) and the rounds take turns between them,
  // so a change in the machine's load weighs on every scheduler alike.
  const subjects = await Promise.all(modes.map((mode) => subjectOf(mode, keysFile)));
  try {
    for (let i = 0; i < ROUNDS; i++) for (const s of subjects) await round(s);
  } finally {
    for (const s of subjects) s.child.kill('SIGTERM');
  }
  for (const [index, mode] of modes.entries()) {
    const r = (subjects[index] as Subject).result;
    const rows = [
      ...r.rounds.map((x, i) => [String(i + 1), x.alone, x.flood] as const),
      ['all', joined(r.rounds.map((x) => x.alone)), joined(r.rounds.map((x) => x.flood))] as const,
    ];
    for (const [n, alone, flood] of rows) {
      const [a50, a99, b50, b99] = [
        percentile(alone.ttfts, 50),
        percentile(alone.ttfts, 99),
        percentile(flood.ttfts, 50),
        percentile(flood.ttfts, 99),
      ];
      console.log(
        `${MODES[mode].name.padEnd(30)} ${n.padStart(5)}   ${f(a50)} / ${f(a99)}        ${f(b50)} / ${f(b99)}        ` +
          `${(b50 / a50).toFixed(2).padStart(6)}x   ${(b99 / a99).toFixed(2).padStart(6)}x` +
          (n === 'all'
            ? `   ${(r.aTokens / (r.aMs / 1000)).toFixed(0).padStart(6)} / ${(r.aAloneTokens / (r.aAloneMs / 1000)).toFixed(0)}`
            : ''),
      );
    }
    const traced = subjects[index] as Subject;
    if (traced.traceDir !== undefined) details.push(...breakdownLines(mode, traced.traceDir, traced.bRequests));
    for (const [when, p] of [
      ['alone', joined(r.rounds.map((x) => x.alone))],
      ['beside A', joined(r.rounds.map((x) => x.flood))],
    ] as const) {
      const steps = Math.max(1, p.numSteps);
      const queued = `B's server-side wait for its first token ${(p.queueMs / Math.max(1, p.numQueued)).toFixed(1)} ms`;
      if (TARGET === 'up') {
        details.push(`  ${mode} ${when}: ${queued} (the router's handoff to B's first token)`);
        continue;
      }
      details.push(
        `  ${mode} ${when}: mean step ${(p.stepMs / steps).toFixed(1)} ms (${(p.numItems / steps).toFixed(1)} items; ` +
          `one step per ${(p.wallMs / steps).toFixed(1)} ms of wall time), ` +
          `B's server-side wait for its first token ${(p.queueMs / Math.max(1, p.numQueued)).toFixed(1)} ms`,
      );
    }
  }
  console.log(details.join('\n'));
  console.log(`load average at the end: ${load()}`);
}

await main();
