// Fair sharing benchmark (`npm run bench:fair`): does one tenant's flood of long prompts hold
// another tenant's short requests back? A real `tessera serve` on gen-model's m100 (q4_0 GGUF at
// /tmp/m100.gguf, generated once) with two API keys. Tenant B sends short streaming chat requests
// one after another, first alone, then while tenant A keeps 24 long prompts (400 words, 64 tokens)
// in flight; B's time to first token (p50/p99) both ways and their ratio are printed, for the
// scheduler's fair sharing (virtual token counters) and, in the same run, for a second server
// started with TESSERA_ALLOW_FAULTS=1 TESSERA_FAULT=no-tenant-fairness (first come first served).
// A benchmark, not a test: it asserts nothing about speed. The target (issue 33): B's p99 with
// A's flood within 2x of B's p99 alone.
//
//   node --import ./bench/lib/register-ts.mjs bench/fair.ts [--samples 40] [--flood 24]
//        [--max-step-ms auto|off|MS] [--only fair|fcfs]
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Rng } from '../src/core/index.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const SAMPLES = Number(flag('--samples') ?? 40);
const FLOOD = Number(flag('--flood') ?? 24);
const MAX_STEP_MS = flag('--max-step-ms');
const ONLY = flag('--only');
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
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      'bin/tessera.js',
      'serve',
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
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...(faults === undefined ? {} : { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: faults }) },
    },
  );
  let out = '';
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the server exited with code ${code} before listening`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
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

interface Ttft {
  readonly p50: number;
  readonly p99: number;
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
  const text = await (await fetch(`${url}/metrics`)).text();
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
  readonly ttft: Ttft;
  /** Mean step (ms) and items per step while B was measured. */
  readonly stepMs: number;
  /** Wall time per step (the loop's gaps included). */
  readonly wallPerStepMs: number;
  readonly itemsPerStep: number;
  /** B's mean server-side queue time (handoff to first token), ms. */
  readonly queueMs: number;
}

async function phase(url: string, run: () => Promise<Ttft>): Promise<Phase> {
  const [loop0, queue0] = [await loopOf(url), await queueMsOf(url)];
  const startMs = performance.now();
  const ttft = await run();
  const wallMs = performance.now() - startMs;
  const [loop1, queue1] = [await loopOf(url), await queueMsOf(url)];
  const steps = Math.max(1, loop1.numSteps - loop0.numSteps);
  return {
    ttft,
    stepMs: (loop1.stepMsTotal - loop0.stepMsTotal) / steps,
    wallPerStepMs: wallMs / steps,
    itemsPerStep: (loop1.numItemsStepped - loop0.numItemsStepped) / steps,
    queueMs: (queue1.sum - queue0.sum) / Math.max(1, queue1.count - queue0.count),
  };
}

/** B's short requests, one after another (two warm-ups first, not counted). */
async function tenantB(client: OpenAI, rng: Rng): Promise<Ttft> {
  const ttfts: number[] = [];
  for (let i = 0; i < SAMPLES + 2; i++) {
    const ms = await ttftOf(client, `question ${i}: ${words(rng, 8)}`, 8);
    if (i >= 2) ttfts.push(ms);
  }
  return { p50: percentile(ttfts, 50), p99: percentile(ttfts, 99) };
}

/** A keeps FLOOD long prompts in flight until `stop` aborts; resolves once every slot has one running. */
function floodA(client: OpenAI, rng: Rng, stop: AbortController): { started: Promise<void>; done: Promise<number> } {
  let numServed = 0;
  let numStarted = 0;
  let markStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const slot = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      const ttft = ttftOf(client, words(rng, 400), 64, stop.signal);
      if (++numStarted === FLOOD) setTimeout(markStarted, 1000); // every slot sent, the first prefills under way
      try {
        await ttft;
        numServed++;
      } catch (error) {
        if (!stop.signal.aborted) throw error;
      }
    }
  };
  const done = Promise.all(Array.from({ length: FLOOD }, slot)).then(() => numServed);
  return { started, done };
}

async function measure(
  mode: 'fair' | 'fcfs',
  keysFile: string,
): Promise<{ alone: Phase; flood: Phase; served: number }> {
  const { url, child } = await startServer(keysFile, mode === 'fcfs' ? 'no-tenant-fairness' : undefined);
  try {
    const opts = { baseURL: `${url}/v1`, maxRetries: 0, timeout: 600_000 };
    const a = new OpenAI({ ...opts, apiKey: KEY_A });
    const b = new OpenAI({ ...opts, apiKey: KEY_B });
    const rng = new Rng(33);
    const alone = await phase(url, () => tenantB(b, rng));
    const stop = new AbortController();
    setMaxListeners(0, stop.signal); // the openai client adds listeners per A request (and per retry of its body)
    const flood = floodA(a, rng, stop);
    await flood.started;
    const withFlood = await phase(url, () => tenantB(b, rng));
    stop.abort();
    const served = await flood.done;
    return { alone, flood: withFlood, served };
  } finally {
    child.kill('SIGTERM');
  }
}

async function main(): Promise<void> {
  ensureModel();
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-fair-'));
  const keysFile = join(dir, 'keys.json');
  writeFileSync(keysFile, JSON.stringify({ [KEY_A]: 'alice', [KEY_B]: 'bob' }));
  const modes = (['fair', 'fcfs'] as const).filter((m) => ONLY === undefined || ONLY === m);
  const f = (ms: number): string => ms.toFixed(0).padStart(6);
  console.log(
    `bench:fair  m100 q4_0, tenant B: ${SAMPLES} short streaming chats (8 tokens) one after another; ` +
      `tenant A: ${FLOOD} long prompts (400 words, 64 tokens) in flight; --max-step-ms ${MAX_STEP_MS ?? 'auto'}`,
  );
  console.log('scheduler                   B alone p50/p99 ms   B beside A p50/p99 ms   p99 ratio  (A served)');
  const details: string[] = [];
  for (const mode of modes) {
    const r = await measure(mode, keysFile);
    const name = mode === 'fair' ? 'fair (virtual token ctr)' : 'FCFS (no-tenant-fairness)';
    console.log(
      `${name.padEnd(27)} ${f(r.alone.ttft.p50)} / ${f(r.alone.ttft.p99)}      ${f(r.flood.ttft.p50)} / ${f(r.flood.ttft.p99)}       ` +
        `${(r.flood.ttft.p99 / r.alone.ttft.p99).toFixed(2).padStart(6)}x   (${r.served})`,
    );
    for (const [when, p] of [
      ['alone', r.alone],
      ['beside A', r.flood],
    ] as const) {
      details.push(
        `  ${mode} ${when}: mean step ${p.stepMs.toFixed(1)} ms (${p.itemsPerStep.toFixed(1)} items; ` +
          `one step per ${p.wallPerStepMs.toFixed(1)} ms of wall time), ` +
          `B's server-side wait for its first token ${p.queueMs.toFixed(1)} ms`,
      );
    }
  }
  console.log(details.join('\n'));
}

await main();
