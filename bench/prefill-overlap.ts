// Prefill TTFT and throughput through `tessera up`, this build against another build of Tessera
// in the same run (`npm run bench:prefill-overlap -- --before DIR`): DIR is the package root of
// the other build (package.json, bin/, dist/, with node_modules and build/ beside or linked).
// Made for "a prefill node sends one step's chunks while it computes the next": the arms
// alternate (before, after, before, after ...), each starts its own `up`, warms up, then times
// long prompts one at a time (TTFT, with max_tokens 1) and a burst of them at once (prompt
// tokens per second of wall time). It prints each arm's medians and the ratios after/before.
// A benchmark, not a test: it asserts nothing. JSON under bench/results/.
//
//   node --import ./bench/lib/register-ts.mjs bench/prefill-overlap.ts --before DIR [--rounds 2]
//        [--len 940] [--serial 4] [--burst 4] [--cpus prefill=0,decode=1,router=0] [--model PATH]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import { Rng } from '../src/core/index.js';
import { m100Path, oneRequest, percentile } from './lib/pd-client.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const BEFORE = flag('--before');
if (BEFORE === undefined) {
  process.stderr.write(
    'bench:prefill-overlap: --before DIR (the package root of the build to compare with) is required\n',
  );
  process.exit(2);
}
const ROUNDS = Number(flag('--rounds') ?? 2);
const LEN = Number(flag('--len') ?? 940);
const SERIAL = Number(flag('--serial') ?? 4);
const BURST = Number(flag('--burst') ?? 4);
const CPUS = flag('--cpus');

interface Server {
  readonly url: string;
  readonly child: ChildProcess;
}

function startUp(root: string, model: string): Promise<Server> {
  const argv = ['up', '--model', model, '--served-model-name', 'm100', '--port', '0'];
  if (CPUS !== undefined) argv.push('--cpus', CPUS);
  const child = spawn(process.execPath, [join(root, 'bin', 'tessera.js'), ...argv], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  return new Promise((ok, fail) => {
    child.on('exit', (code) => fail(new Error(`tessera up (${root}) exited with code ${code} before listening`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /tessera: listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
      if (url !== undefined) ok({ url, child });
    });
  });
}

async function stop(server: Server): Promise<void> {
  const exited = new Promise<void>((done) => server.child.once('exit', () => done()));
  server.child.kill('SIGTERM');
  await exited;
}

interface ArmRun {
  readonly ttftMs: number[];
  readonly burstTokensPerS: number;
}

async function runArm(root: string, model: string, rng: Rng): Promise<ArmRun> {
  const server = await startUp(root, model);
  try {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600_000 });
    const prompt = (): number[] => Array.from({ length: LEN }, () => 3 + rng.int(31_000));
    await oneRequest(client, prompt(), 1, performance.now()); // warm-up (first-step costs, connections)
    const ttftMs: number[] = [];
    for (let i = 0; i < SERIAL; i++) ttftMs.push((await oneRequest(client, prompt(), 1, performance.now())).ttftMs);
    const t = performance.now();
    await Promise.all(Array.from({ length: BURST }, () => oneRequest(client, prompt(), 1, t)));
    return { ttftMs, burstTokensPerS: (BURST * LEN) / ((performance.now() - t) / 1000) };
  } finally {
    await stop(server);
  }
}

const model = flag('--model') ?? (await m100Path());
const roots = { before: resolve(BEFORE), after: resolve('.') };
const runs: Record<'before' | 'after', ArmRun[]> = { before: [], after: [] };
const rng = new Rng(7);
for (let round = 0; round < ROUNDS; round++) {
  for (const arm of ['before', 'after'] as const) {
    const r = await runArm(roots[arm], model, rng);
    runs[arm].push(r);
    process.stdout.write(
      `round ${round + 1} ${arm.padEnd(6)}: TTFT ${r.ttftMs.map((x) => x.toFixed(0)).join(' / ')} ms, ` +
        `burst of ${BURST}: ${r.burstTokensPerS.toFixed(0)} prompt tok/s\n`,
    );
  }
}
const summary = (arm: 'before' | 'after') => ({
  ttftP50Ms: percentile(
    runs[arm].flatMap((r) => r.ttftMs),
    50,
  ),
  burstTokensPerS: percentile(
    runs[arm].map((r) => r.burstTokensPerS),
    50,
  ),
});
const before = summary('before');
const after = summary('after');
const ratios = {
  ttftAfterOverBefore: after.ttftP50Ms / before.ttftP50Ms,
  throughputAfterOverBefore: after.burstTokensPerS / before.burstTokensPerS,
};
process.stdout.write(
  `\nprompt ${LEN} tokens, max_tokens 1, ${ROUNDS} rounds, cpus ${CPUS ?? 'unpinned'} (${cpus().length} cores)\n` +
    `before: TTFT p50 ${before.ttftP50Ms.toFixed(0)} ms, burst ${before.burstTokensPerS.toFixed(0)} tok/s\n` +
    `after:  TTFT p50 ${after.ttftP50Ms.toFixed(0)} ms, burst ${after.burstTokensPerS.toFixed(0)} tok/s\n` +
    `after/before: TTFT ${ratios.ttftAfterOverBefore.toFixed(3)}x, throughput ${ratios.throughputAfterOverBefore.toFixed(3)}x\n`,
);
await mkdir('bench/results', { recursive: true });
const file = join('bench/results', `prefill-overlap-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await writeFile(file, JSON.stringify({ roots, len: LEN, cpus: CPUS ?? null, runs, before, after, ratios }, null, 2));
process.stdout.write(`wrote ${file}\n`);
