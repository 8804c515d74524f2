// Interference benchmark (`npm run bench:pd`), in the layout of vLLM's disagg_benchmarks: the
// same workload on co-located `tessera serve` and on PD (`tessera up`, prefill and decode pinned
// to disjoint cores with --cpus; the router left to run wherever a core is free), first chats
// alone, then chats with long prompts arriving at a fixed rate. TTFT, TPOT and ITL (mean, p50, p99) for chats and long requests separately;
// goodput at the SLO below; JSON under bench/results/ and an SVG plot beside it (ITL
// distributions and ITL over time, both modes). A benchmark, not a test: it asserts nothing.
//
//   node --import ./bench/lib/register-ts.mjs bench/pd.ts [--quick] [--chats 8] [--chat-len 150]
//        [--chat-out 48] [--long-len 940] [--long-every-s 6] [--duration-s 30] [--model PATH]
//        [--modes colocated,pd] [--before DIR] [--cpus prefill=0,decode=1] [--no-floor]
// --before DIR: every mode runs twice in the same run, first on the build at DIR (a package root:
// package.json, bin/, dist/) as `<mode>@before`, then on this one; the ratios are printed last.
// --cpus: PD's `tessera up --cpus` (default prefill=0,decode=1-; one core: none). The router is
// not pinned by default: it relays every token, and pinned to the prefill's core it waited
// behind prefill's steps (2 vCPUs, m100, 15 s phases, alternating: chats' ITL p99 with long
// prompts / alone median 2.11-2.88x with router=0 and 2.57-2.67x with router=1, 1.60-1.89x
// unpinned).
// The host's floor (unless --no-floor; needs 2 cores and taskset): before the modes, the same
// decode work with no server at all (bench/lib/step-floor.mjs: the threaded engine, 8 chats'
// worth of identical decode steps) on PD's decode core, alone and then with prompts prefilled
// on the prefill core. Its step p99 over the alone median is what this machine's noise gives
// the ratio below before any server runs, for batch-8 steps (2 vCPUs, m100: 1.41-1.61x as plain
// JavaScript; 1.31-2.06x while it still ran through the TypeScript hooks, see step-floor.mjs).
// The batch mix (bench/lib/batch-mix.ts): the floor's steps are all batch 8, a server's are not.
// Per mode, the chats' ITL median for each count of requests decoding as a token arrived, and
// the ratio those medians alone give (PD, m100, chats alone, one run: 1.61x of the measured
// 2.37x; the decode node's own step trace in another run gave 1.38x of 1.83x).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Rng } from '../src/core/index.js';
import { parseCpuPins, pinnedCommand, type CpuPins } from '../src/cli/cpu-pinning.js';
import { batchMix } from './lib/batch-mix.js';
import { itlPlotSvg, type Series } from './lib/pd-plot.js';
import { m100Path, oneRequest, stats, type RequestResult } from './lib/pd-client.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const CHATS = Number(flag('--chats') ?? 8);
const CHAT_LEN = Number(flag('--chat-len') ?? 150);
const CHAT_OUT = Number(flag('--chat-out') ?? 48);
const LONG_LEN = Number(flag('--long-len') ?? 940);
const LONG_OUT = 16;
const LONG_EVERY_S = Number(flag('--long-every-s') ?? 6);
const DURATION_S = Number(flag('--duration-s') ?? (quick ? 15 : 30));
const MODES = (flag('--modes') ?? 'colocated,pd').split(',') as ('colocated' | 'pd')[];
const BEFORE = flag('--before');
/** Each run: a mode on a build (BEFORE's, then this one). */
const RUNS = MODES.flatMap((mode) => [
  ...(BEFORE === undefined ? [] : [{ mode, label: `${mode}@before`, root: BEFORE }]),
  { mode, label: mode, root: '.' },
]);
/** The SLO goodput counts against (stated in the output): a chat meets it with both. */
const SLO = { ttftMs: 2000, tpotMs: 150 };

interface Server {
  readonly url: string;
  readonly child: ChildProcess;
}

function start(root: string, argv: string[]): Promise<Server> {
  const child = spawn(process.execPath, [join(root, 'bin', 'tessera.js'), ...argv], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`tessera ${argv[0]} exited with code ${code} before listening`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /tessera: listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
      if (url !== undefined) resolve({ url, child });
    });
  });
}

/** PD's --cpus: the flag's, or prefill on core 0 and decode on the rest (none on one core). */
function cpuSpec(): string | undefined {
  const n = availableParallelism();
  return flag('--cpus') ?? (n >= 2 ? `prefill=0,decode=${n >= 3 ? '1-' + (n - 1) : '1'}` : undefined);
}

async function startMode(mode: 'colocated' | 'pd', model: string, root: string): Promise<Server> {
  const common = ['--model', model, '--served-model-name', 'm100', '--port', '0', '--max-running-requests', '32'];
  if (mode === 'colocated') return start(root, ['serve', ...common]);
  const spec = cpuSpec();
  const pins = spec === undefined ? [] : ['--cpus', spec];
  return start(root, ['up', ...common, ...pins]);
}

interface FloorRun {
  readonly steps: number;
  readonly medianMs: number;
  readonly p99Ms: number;
}

/** bench/lib/step-floor.mjs pinned to a role's cores (see the header). */
function stepFloor(
  pins: CpuPins,
  role: 'decode' | 'prefill',
  model: string,
  steps: number,
): { child: ChildProcess; result: Promise<FloorRun> } {
  const script = ['bench/lib/step-floor.mjs', model, role, String(steps)];
  const { command, args: argv } = pinnedCommand(pins, role, process.execPath, script);
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  const result = new Promise<FloorRun>((resolve, reject) =>
    child.on('exit', (code, signal) =>
      code === 0 ? resolve(JSON.parse(out) as FloorRun) : reject(new Error(`step-floor ${role}: ${code ?? signal}`)),
    ),
  );
  return { child, result };
}

/** The floor's two runs: decode alone, then beside a prefill load; undefined when it cannot pin. */
async function hostFloor(
  model: string,
): Promise<{ alone: FloorRun; withPrefill: FloorRun; ratio: number } | undefined> {
  const pins = parseCpuPins(cpuSpec());
  if (args.includes('--no-floor') || !pins.has('decode') || !pins.has('prefill')) return undefined;
  const steps = quick ? 150 : 300;
  const alone = await stepFloor(pins, 'decode', model, steps).result;
  const load = stepFloor(pins, 'prefill', model, 0);
  load.result.catch(() => undefined); // killed below
  try {
    await new Promise((resolve) => setTimeout(resolve, 5000)); // its model loaded, prefilling
    const withPrefill = await stepFloor(pins, 'decode', model, steps).result;
    return { alone, withPrefill, ratio: withPrefill.p99Ms / alone.medianMs };
  } finally {
    load.child.kill('SIGTERM');
  }
}

interface Phase {
  readonly chats: RequestResult[];
  readonly long: RequestResult[];
  readonly durationS: number;
}

/** Closed-loop chats for DURATION_S; with `long`, a long prompt every LONG_EVERY_S (open loop). */
async function runPhase(url: string, withLong: boolean, rng: Rng, t0: number): Promise<Phase> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600_000 });
  const prompt = (n: number): number[] => Array.from({ length: n }, () => 3 + rng.int(31_000));
  const chats: RequestResult[] = [];
  const long: RequestResult[] = [];
  const start = performance.now();
  const until = start + DURATION_S * 1000;
  const longs: Promise<void>[] = [];
  const timer = withLong
    ? setInterval(
        () => longs.push(timed(oneRequest(client, prompt(LONG_LEN), LONG_OUT, t0)).then((r) => void long.push(r))),
        LONG_EVERY_S * 1000,
      )
    : undefined;
  await Promise.all(
    Array.from({ length: CHATS }, async () => {
      while (performance.now() < until) chats.push(await timed(oneRequest(client, prompt(CHAT_LEN), CHAT_OUT, t0)));
    }),
  );
  clearInterval(timer);
  await Promise.all(longs);
  return { chats, long, durationS: (performance.now() - start) / 1000 };
}

/**
 * A request that failed (e.g. fetch's 300 s headers timeout: the 200 waits for the first token)
 * counts as one that missed every SLO, with an infinite TTFT, instead of ending the benchmark.
 */
async function timed(request: Promise<RequestResult>): Promise<RequestResult> {
  try {
    return await request;
  } catch (error) {
    process.stderr.write(`a request failed: ${error instanceof Error ? error.message : String(error)}\n`);
    return { ttftMs: Infinity, itlMs: [], itlAt: [], e2eMs: Infinity, outputTokens: 0 };
  }
}

function summary(results: readonly RequestResult[], durationS: number) {
  const tpot = results.filter((r) => r.outputTokens > 1).map((r) => (r.e2eMs - r.ttftMs) / (r.outputTokens - 1));
  const good = results.filter(
    (r) => r.ttftMs <= SLO.ttftMs && (r.outputTokens <= 1 || (r.e2eMs - r.ttftMs) / (r.outputTokens - 1) <= SLO.tpotMs),
  );
  return {
    completed: results.length,
    ttftMs: stats(results.map((r) => r.ttftMs)),
    tpotMs: stats(tpot),
    itlMs: stats(results.flatMap((r) => r.itlMs)),
    // Each request's first gap (first token to second), apart: in PD it is the hand-off (the KV
    // moving from prefill to decode, landing, and the decode node's first step for it).
    firstGapMs: stats(results.flatMap((r) => r.itlMs.slice(0, 1))),
    itlAfterFirstGapMs: stats(results.flatMap((r) => r.itlMs.slice(1))),
    goodputReqPerS: good.length / durationS,
    sloAttainment: results.length === 0 ? 0 : good.length / results.length,
  };
}

const model = flag('--model') ?? (await m100Path());
console.log(
  `bench:pd on ${cpus()[0]?.model ?? '?'} x ${availableParallelism()}: ${CHATS} chats (${CHAT_LEN} in, ${CHAT_OUT} out) for ${DURATION_S} s, ` +
    `then with a ${LONG_LEN}-token prompt every ${LONG_EVERY_S} s; SLO TTFT <= ${SLO.ttftMs} ms and TPOT <= ${SLO.tpotMs} ms`,
);
const floor = await hostFloor(model);
if (floor !== undefined) {
  const f = (r: FloorRun) => `median ${r.medianMs.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms`;
  console.log(
    `host floor (identical decode steps, no server, on PD's decode core): alone ${f(floor.alone)}; ` +
      `beside a prefill load ${f(floor.withPrefill)}; p99 beside the load / median alone ${floor.ratio.toFixed(2)}x`,
  );
}
const results: Record<string, unknown> = {};
const series: Series[] = [];
const ratios: Record<string, number> = {};
for (const { mode, label, root } of RUNS) {
  const server = await startMode(mode, model, root);
  try {
    const rng = new Rng(0);
    const t0 = performance.now();
    await oneRequest(
      new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600_000 }),
      [5, 6, 7],
      4,
      t0,
    ); // warm-up
    const alone = await runPhase(server.url, false, rng, t0);
    const mixedT0 = performance.now();
    const mixed = await runPhase(server.url, true, rng, mixedT0);
    const r = {
      chatsAlone: summary(alone.chats, alone.durationS),
      chatsWithLong: summary(mixed.chats, mixed.durationS),
      long: summary(mixed.long, mixed.durationS),
    };
    // The ratio the decode batch's mix alone gives (bench/lib/batch-mix.ts).
    const mix = {
      chatsAlone: batchMix(alone.chats, alone.chats),
      chatsWithLong: batchMix(mixed.chats, [...mixed.chats, ...mixed.long]),
    };
    results[label] = { ...r, batchMix: mix };
    series.push({ label: `${label}, chats alone`, itl: alone.chats.flatMap((x) => x.itlMs), points: [] });
    series.push({
      label: `${label}, with long prompts`,
      itl: mixed.chats.flatMap((x) => x.itlMs),
      points: mixed.chats.flatMap((x) => x.itlAt),
    });
    const ratio = r.chatsWithLong.itlMs.p99 / Math.max(1e-9, r.chatsAlone.itlMs.median);
    const ownRatio = r.chatsAlone.itlMs.p99 / Math.max(1e-9, r.chatsAlone.itlMs.median);
    ratios[label] = ratio;
    console.log(`\n== ${label}`);
    for (const [name, s] of Object.entries(r)) {
      console.log(
        `${name.padEnd(14)} n=${String(s.completed).padStart(4)}  TTFT mean/p50/p99 ${s.ttftMs.mean.toFixed(0)}/${s.ttftMs.median.toFixed(0)}/${s.ttftMs.p99.toFixed(0)} ms  ` +
          `TPOT ${s.tpotMs.mean.toFixed(1)}/${s.tpotMs.median.toFixed(1)}/${s.tpotMs.p99.toFixed(1)}  ITL ${s.itlMs.mean.toFixed(1)}/${s.itlMs.median.toFixed(1)}/${s.itlMs.p99.toFixed(1)} ms  ` +
          `goodput ${s.goodputReqPerS.toFixed(2)} req/s (${(100 * s.sloAttainment).toFixed(0)}% in SLO)`,
      );
      console.log(
        `${''.padEnd(14)} first gap mean/p50/p99 ${s.firstGapMs.mean.toFixed(1)}/${s.firstGapMs.median.toFixed(1)}/${s.firstGapMs.p99.toFixed(1)} ms  ` +
          `ITL after it ${s.itlAfterFirstGapMs.mean.toFixed(1)}/${s.itlAfterFirstGapMs.median.toFixed(1)}/${s.itlAfterFirstGapMs.p99.toFixed(1)} ms`,
      );
    }
    console.log(
      `chats' ITL p99 with long prompts / ITL median alone: ${ratio.toFixed(2)}x ` +
        `(without long prompts, p99 / median: ${ownRatio.toFixed(2)}x)`,
    );
    const groups = mix.chatsAlone.groups.map((g) => `${g.decoding}: ${g.medianMs.toFixed(1)} ms (${g.samples})`);
    console.log(
      `batch mix, chats alone (requests decoding as each token arrived: ITL median (samples)): ${groups.join(', ')}; ` +
        `each sample at its batch's median gives p99 / median ${mix.chatsAlone.ratio.toFixed(2)}x ` +
        `(with long prompts ${mix.chatsWithLong.ratio.toFixed(2)}x)`,
    );
  } finally {
    server.child.kill('SIGTERM');
    await new Promise((resolve) => server.child.once('exit', resolve));
  }
}
if (BEFORE !== undefined) {
  console.log(`\nthe same run, this build against ${BEFORE} (chats' ITL p99 with long prompts / ITL median alone):`);
  for (const mode of MODES) {
    const [b, a] = [ratios[`${mode}@before`] ?? NaN, ratios[mode] ?? NaN];
    console.log(`${mode.padEnd(10)} before ${b.toFixed(2)}x  after ${a.toFixed(2)}x`);
  }
}
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
await mkdir(join('bench', 'results'), { recursive: true });
const json = join('bench', 'results', `pd-${stamp}.json`);
await writeFile(
  json,
  `${JSON.stringify(
    {
      model,
      cpu: cpus()[0]?.model,
      threads: availableParallelism(),
      chats: CHATS,
      chatLen: CHAT_LEN,
      chatOut: CHAT_OUT,
      longLen: LONG_LEN,
      longEveryS: LONG_EVERY_S,
      durationS: DURATION_S,
      slo: SLO,
      hostFloor: floor,
      results,
    },
    null,
    2,
  )}\n`,
);
const svg = join('bench', 'results', `pd-${stamp}.svg`);
await writeFile(
  svg,
  itlPlotSvg(series, `chats' ITL: ${CHATS} chats, + a ${LONG_LEN}-token prompt every ${LONG_EVERY_S} s`),
);
console.log(`\nwrote ${json} and ${svg}`);
