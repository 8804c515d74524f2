// Soak (`npm run soak`): 20,000 short streaming requests through `tessera up` (builtin:tiny by
// default), in blocks of 1,000. Per block: request latency (p50, p99), CPU seconds per request
// and RSS of every process of the cluster (from /proc). At the end every worker's pages must be
// free or cached (none allocated or quarantined). Checks: the last block's latency p50 and CPU
// per request at most 1.5x the first's, RSS at most 1.5x the first block's + 64 MiB; it exits 1
// when one fails. Not part of `npm test` (minutes); measured numbers on a shared machine are noisy.
//
//   node --import ./bench/lib/register-ts.mjs bench/soak.ts [--requests 20000] [--concurrency 8]
//        [--model builtin:tiny] [--cpus prefill=0,decode=1,router=0]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { Rng } from '../src/core/index.js';
import { percentile } from './lib/pd-client.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const REQUESTS = Number(flag('--requests') ?? 20_000);
const CONCURRENCY = Number(flag('--concurrency') ?? 8);
const BLOCK = 1000;
const MODEL = flag('--model') ?? 'builtin:tiny';
const CPUS = flag('--cpus');

const child = spawn(
  process.execPath,
  ['bin/tessera.js', 'up', '--model', MODEL, '--port', '0', ...(CPUS === undefined ? [] : ['--cpus', CPUS])],
  {
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
let out = '';
const ready = new Promise<{ url: string; pids: number[]; workers: string[] }>((resolve, reject) => {
  child.on('exit', (code) => reject(new Error(`tessera up exited with code ${code}`)));
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    const url = /tessera: listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
    if (url === undefined) return;
    const pids = [...out.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
    const workers = [...out.matchAll(/(?:prefill|decode)-\d+\s+http: (http:\/\/\S+)/g)].map((m) => m[1] as string);
    resolve({ url, pids: [child.pid as number, ...pids], workers });
  });
});

/** CPU seconds (user + system) and RSS bytes of one process, from /proc. */
function procSample(pid: number): { cpuS: number; rssBytes: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    return { cpuS: ticks / 100, rssBytes: rssKb * 1024 };
  } catch {
    return { cpuS: 0, rssBytes: 0 };
  }
}

const { url, pids, workers } = await ready;
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60_000 });
const rng = new Rng(0);
interface Block {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly cpuMsPerRequest: number;
  readonly rssMiB: number;
  readonly failures: number;
}
const blocks: Block[] = [];
let failures = 0;
try {
  let cpuBefore = pids.reduce((a, p) => a + procSample(p).cpuS, 0);
  for (let done = 0; done < REQUESTS; done += BLOCK) {
    const latencies: number[] = [];
    let next = 0;
    let blockFailures = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next++ < BLOCK) {
          const prompt = Array.from({ length: 8 + rng.int(24) }, () => 3 + rng.int(31_000));
          const start = performance.now();
          try {
            const stream = (await client.completions.create({
              model: MODEL,
              prompt,
              max_tokens: 4,
              temperature: 0,
              stream: true,
            } as never)) as unknown as AsyncIterable<unknown>;
            for await (const _ of stream);
            latencies.push(performance.now() - start);
          } catch {
            blockFailures++;
          }
        }
      }),
    );
    const samples = pids.map(procSample);
    const cpu = samples.reduce((a, s) => a + s.cpuS, 0);
    const block: Block = {
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      cpuMsPerRequest: ((cpu - cpuBefore) * 1000) / BLOCK,
      rssMiB: samples.reduce((a, s) => a + s.rssBytes, 0) / 2 ** 20,
      failures: blockFailures,
    };
    cpuBefore = cpu;
    failures += blockFailures;
    blocks.push(block);
    console.log(
      `requests ${String(done + BLOCK).padStart(6)}: p50 ${block.p50Ms.toFixed(1)} ms, p99 ${block.p99Ms.toFixed(1)} ms, ` +
        `CPU ${block.cpuMsPerRequest.toFixed(2)} ms/request, RSS ${block.rssMiB.toFixed(0)} MiB, failures ${blockFailures}`,
    );
  }
  const pages = await Promise.all(
    workers.map(async (w) => ((await (await fetch(`${w}/health`)).json()) as { pages: Record<string, number> }).pages),
  );
  const first = blocks[0] as Block;
  const last = blocks.at(-1) as Block;
  const checks = [
    [`latency p50 last/first ${(last.p50Ms / first.p50Ms).toFixed(2)} <= 1.5`, last.p50Ms <= 1.5 * first.p50Ms],
    [
      `CPU per request last/first ${(last.cpuMsPerRequest / first.cpuMsPerRequest).toFixed(2)} <= 1.5`,
      last.cpuMsPerRequest <= 1.5 * first.cpuMsPerRequest,
    ],
    [
      `RSS ${first.rssMiB.toFixed(0)} -> ${last.rssMiB.toFixed(0)} MiB <= 1.5x + 64`,
      last.rssMiB <= 1.5 * first.rssMiB + 64,
    ],
    [`no failed request (${failures})`, failures === 0],
    [
      `every page free or cached: ${JSON.stringify(pages)}`,
      pages.every((p) => (p['allocated'] ?? 1) === 0 && (p['quarantined'] ?? 1) === 0),
    ],
  ] as const;
  for (const [what, ok] of checks) console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  process.exitCode = checks.every(([, ok]) => ok) ? 0 : 1;
} finally {
  child.kill('SIGTERM');
}
