// /health under load (`npm run bench:health`): one `tessera serve` on m100, /health polled every
// 50 ms, first with the server idle (the reference: what this machine's load alone costs a
// request), then while N streams (default 32) of --output-len tokens run at once. Prints /health
// p50/p99/max for both phases and the streams' ITL p50/p99, with the ratios loaded/idle. On a
// shared machine the idle phase shows the contention floor; the target is p99 <= 50 ms.
// With --trace-gc, the server runs with node's --trace-gc and the run counts its GC pauses.
// A benchmark, not a test: it asserts nothing.
//
//   node --import ./bench/lib/register-ts.mjs bench/health-load.ts [--streams 32] [--input-len 128]
//        [--output-len 100] [--idle-s 5] [--model PATH] [--trace-gc]
import { spawn, type ChildProcess } from 'node:child_process';
import OpenAI from 'openai';
import { m100Path, oneRequest, percentile } from './lib/pd-client.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const STREAMS = Number(flag('--streams') ?? 32);
const INPUT_LEN = Number(flag('--input-len') ?? 128);
const OUTPUT_LEN = Number(flag('--output-len') ?? 100);
const IDLE_S = Number(flag('--idle-s') ?? 5);
const TRACE_GC = args.includes('--trace-gc');

const model = flag('--model') ?? (await m100Path());
const argv = ['bin/tessera.js', 'serve', '--model', model, '--served-model-name', 'm100', '--port', '0'];
argv.push('--max-running-requests', String(STREAMS));
const child: ChildProcess = spawn(process.execPath, [...(TRACE_GC ? ['--trace-gc'] : []), ...argv], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
let out = '';
const gcPauses: { kind: string; ms: number }[] = [];
let phase: 'idle' | 'load' | 'done' = 'idle';
const url = await new Promise<string>((ok, fail) => {
  child.on('exit', (code) => fail(new Error(`tessera serve exited with code ${code} before listening`)));
  child.stdout?.on('data', (d: Buffer) => {
    const text = d.toString();
    if (phase === 'load') {
      // e.g. "[1234:0x...]  5012 ms: Scavenge 40.1 (52.3) -> 30.2 (52.3) MB, 1.23 / 0.00 ms  ..."
      for (const m of text.matchAll(/ms: (Scavenge|Mark-Compact|Mark-sweep)[^,]*, ([\d.]+) \/ [\d.]+ ms/g))
        gcPauses.push({ kind: m[1] as string, ms: Number(m[2]) });
    }
    out += text;
    const m = /tessera: listening on (http:\/\/[\d.]+:\d+)/.exec(out);
    if (m?.[1] !== undefined) ok(m[1]);
  });
});

async function pollHealth(until: () => boolean): Promise<number[]> {
  const ms: number[] = [];
  while (!until()) {
    const t = performance.now();
    await (await fetch(`${url}/health`)).arrayBuffer();
    ms.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 50));
  }
  return ms;
}

const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600_000 });
const prompt = (i: number): number[] =>
  Array.from({ length: INPUT_LEN }, (_, j) => 3 + ((j * 7919 + i * 131) % 31_000));
try {
  await oneRequest(client, prompt(999), 8, performance.now()); // warm-up
  const idleUntil = performance.now() + IDLE_S * 1000;
  const idle = await pollHealth(() => performance.now() > idleUntil);
  phase = 'load';
  let done = false;
  const polling = pollHealth(() => done);
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: STREAMS }, (_, i) => oneRequest(client, prompt(i), OUTPUT_LEN, t0)),
  );
  const wallS = (performance.now() - t0) / 1000;
  done = true;
  const loaded = await polling;
  phase = 'done';
  const itl = results.flatMap((r) => r.itlMs);
  const row = (name: string, xs: number[]) =>
    `${name.padEnd(8)} /health p50 ${percentile(xs, 50).toFixed(1)} p99 ${percentile(xs, 99).toFixed(1)} max ${Math.max(...xs).toFixed(1)} ms (${xs.length} polls)`;
  console.log(`\n${STREAMS} streams of ${INPUT_LEN} in / ${OUTPUT_LEN} out on tessera serve (m100)`);
  console.log(row('idle', idle));
  console.log(row('loaded', loaded));
  console.log(
    `loaded/idle: p50 ${(percentile(loaded, 50) / percentile(idle, 50)).toFixed(2)}x, p99 ${(percentile(loaded, 99) / percentile(idle, 99)).toFixed(2)}x`,
  );
  const p50 = percentile(itl, 50);
  const p99 = percentile(itl, 99);
  console.log(
    `streams: ${((STREAMS * OUTPUT_LEN) / wallS).toFixed(1)} output tok/s; ITL p50 ${p50.toFixed(1)} p99 ${p99.toFixed(1)} ms (${(p99 / p50).toFixed(2)}x)`,
  );
  if (TRACE_GC) {
    for (const kind of new Set(gcPauses.map((g) => g.kind))) {
      const ms = gcPauses.filter((g) => g.kind === kind).map((g) => g.ms);
      console.log(
        `GC while loaded: ${ms.length} ${kind}, total ${ms.reduce((a, b) => a + b, 0).toFixed(0)} ms, max ${Math.max(...ms).toFixed(1)} ms`,
      );
    }
  }
} finally {
  child.kill('SIGTERM');
}
