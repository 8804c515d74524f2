// Serving benchmark (`npm run bench:serve`): a real `tessera serve` process on gen-model's m100
// (f32 GGUF, generated into $TESSERA_HOME/bench/ when missing, shared with bench:decode), driven
// by closed-loop streaming clients at several concurrencies. Per concurrency: request throughput,
// output and total token throughput, TTFT, TPOT and inter-token latency (mean, median, p99),
// printed in the layout of vLLM's benchmark_serving and written to bench/results/serve-<time>.json.
// A benchmark, not a test: it asserts nothing about speed.
//
//   node --import ./bench/lib/register-ts.mjs bench/serve.ts [--quick] [--concurrency 1,4,16]
//        [--input-len 128] [--output-len 64] [--prompts-per-client 4] [--model PATH] [--deterministic]
//        [--against-decode]
// --against-decode: after the server has stopped, the same process measures bench:decode's figure
// for the same model and lengths (the engine in this process, 16 prompts of --input-len decoding
// --output-len tokens each, decode tokens/s over decode time, best of 3) and prints serve's
// concurrency-16 throughput beside it: the output token throughput (prefill and request turnover
// included) and the decode rate (16 / median TPOT), each as a fraction of the decode figure.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, homedir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Rng } from '../src/core/index.js';
import { createEngine, generate, genModel, loadModel } from '../src/model/index.js';
import { samplingParams } from '../src/core/index.js';
import { linePanelsSvg, svgPathFor } from './lib/svg-plot.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const CONCURRENCY = (flag('--concurrency') ?? (quick ? '1,4' : '1,4,16')).split(',').map(Number);
const INPUT_LEN = Number(flag('--input-len') ?? (quick ? 32 : 128));
const OUTPUT_LEN = Number(flag('--output-len') ?? (quick ? 16 : 64));
const PROMPTS_PER_CLIENT = Number(flag('--prompts-per-client') ?? (quick ? 2 : 4));
const DETERMINISTIC = args.includes('--deterministic');
const AGAINST_DECODE = args.includes('--against-decode');
const AGAINST_BATCH = 16;
const HOME = process.env['TESSERA_HOME'] ?? join(homedir(), '.cache', 'tessera');

async function m100(): Promise<string> {
  const path = join(HOME, 'bench', 'm100-f32-seed0.gguf');
  if (!existsSync(path)) {
    process.stderr.write(`generating ${path} ...\n`);
    await mkdir(join(HOME, 'bench'), { recursive: true });
    await genModel({ preset: 'm100', format: 'gguf', out: path, seed: 0, dtype: 'f32' });
  }
  return path;
}

async function startServer(model: string): Promise<{ url: string; child: ChildProcess; kernels: string }> {
  const maxRunning = String(Math.max(16, ...CONCURRENCY));
  const child = spawn(
    process.execPath,
    [
      'bin/tessera.js',
      'serve',
      '--model',
      model,
      '--served-model-name',
      'm100',
      '--port',
      '0',
      '--max-running-requests',
      maxRunning,
      ...(DETERMINISTIC ? ['--deterministic'] : []),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, TESSERA_HOME: HOME } },
  );
  let out = '';
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the server exited with code ${code} before listening`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
      if (url !== undefined) resolve({ url, child, kernels: /\(([^)]*ops[^)]*)\)/.exec(out)?.[1] ?? '?' });
    });
  });
}

interface RequestResult {
  readonly ttftMs: number;
  /** Gaps between successive chunks that carried tokens. */
  readonly itlMs: number[];
  readonly e2eMs: number;
  readonly outputTokens: number;
  readonly inputTokens: number;
}

async function oneRequest(client: OpenAI, prompt: number[]): Promise<RequestResult> {
  const start = performance.now();
  const stream = (await client.completions.create({
    model: 'm100',
    prompt,
    max_tokens: OUTPUT_LEN,
    temperature: 0,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  } as never)) as unknown as AsyncIterable<OpenAI.Completion>;
  let first: number | undefined;
  let last = start;
  const itlMs: number[] = [];
  let outputTokens = 0;
  let inputTokens = 0;
  for await (const chunk of stream) {
    if (chunk.usage) {
      outputTokens = chunk.usage.completion_tokens;
      inputTokens = chunk.usage.prompt_tokens;
    }
    if ((chunk.choices[0]?.text ?? '') === '') continue;
    const now = performance.now();
    if (first === undefined) first = now;
    else itlMs.push(now - last);
    last = now;
  }
  const end = performance.now();
  return { ttftMs: (first ?? end) - start, itlMs, e2eMs: end - start, outputTokens, inputTokens };
}

const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (rank - lo);
}
const stats = (xs: readonly number[]) => ({ mean: mean(xs), median: percentile(xs, 50), p99: percentile(xs, 99) });

async function runLevel(url: string, concurrency: number, rng: Rng) {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600_000 });
  const numPrompts = concurrency * PROMPTS_PER_CLIENT;
  const prompts = Array.from({ length: numPrompts }, () =>
    Array.from({ length: INPUT_LEN }, () => 3 + rng.int(31_000)),
  );
  await oneRequest(client, prompts[0] as number[]); // warm-up (not counted)
  let next = 0;
  const results: RequestResult[] = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < numPrompts) results.push(await oneRequest(client, prompts[next++] as number[]));
    }),
  );
  const durationS = (performance.now() - start) / 1000;
  const totalIn = results.reduce((a, r) => a + r.inputTokens, 0);
  const totalOut = results.reduce((a, r) => a + r.outputTokens, 0);
  const tpot = results.filter((r) => r.outputTokens > 1).map((r) => (r.e2eMs - r.ttftMs) / (r.outputTokens - 1));
  return {
    concurrency,
    completed: results.length,
    durationS,
    totalInputTokens: totalIn,
    totalOutputTokens: totalOut,
    requestThroughput: results.length / durationS,
    outputThroughput: totalOut / durationS,
    totalThroughput: (totalIn + totalOut) / durationS,
    ttftMs: stats(results.map((r) => r.ttftMs)),
    tpotMs: stats(tpot),
    itlMs: stats(results.flatMap((r) => r.itlMs)),
    e2eMs: stats(results.map((r) => r.e2eMs)),
  };
}

type Level = Awaited<ReturnType<typeof runLevel>>;

function print(level: Level): void {
  const line = (label: string, value: string | number) =>
    console.log(`${label.padEnd(40)}${String(value).padStart(10)}`);
  const f = (n: number) => n.toFixed(2);
  const section = (title: string) => console.log(title.padStart(25 + title.length / 2, '-').padEnd(50, '-'));
  console.log(`${' Serving Benchmark Result '.padStart(37, '=').padEnd(50, '=')}`);
  line('Successful requests:', level.completed);
  line('Maximum request concurrency:', level.concurrency);
  line('Benchmark duration (s):', f(level.durationS));
  line('Total input tokens:', level.totalInputTokens);
  line('Total generated tokens:', level.totalOutputTokens);
  line('Request throughput (req/s):', f(level.requestThroughput));
  line('Output token throughput (tok/s):', f(level.outputThroughput));
  line('Total Token throughput (tok/s):', f(level.totalThroughput));
  for (const [title, key, name] of [
    ['Time to First Token', 'ttftMs', 'TTFT'],
    ['Time per Output Token (excl. 1st token)', 'tpotMs', 'TPOT'],
    ['Inter-token Latency', 'itlMs', 'ITL'],
    ['End-to-end Latency', 'e2eMs', 'E2EL'],
  ] as const) {
    section(title);
    line(`Mean ${name} (ms):`, f(level[key].mean));
    line(`Median ${name} (ms):`, f(level[key].median));
    line(`P99 ${name} (ms):`, f(level[key].p99));
  }
  console.log('='.repeat(50));
}

const model = flag('--model') ?? (await m100());
const server = await startServer(model);
console.log(
  `tessera serve ${model} (${server.kernels}) on ${cpus()[0]?.model ?? '?'} x ${availableParallelism()}; input ${INPUT_LEN}, output ${OUTPUT_LEN} tokens, greedy, ignore_eos`,
);
const levels: Level[] = [];
try {
  const rng = new Rng(0);
  for (const c of CONCURRENCY) {
    const level = await runLevel(server.url, c, rng);
    levels.push(level);
    print(level);
  }
} finally {
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await exited;
}

/** bench:decode's figure in this process: decode tok/s of AGAINST_BATCH requests, best of `runs`. */
async function decodeFigure(runs = 3): Promise<number> {
  const engine = await createEngine(await loadModel(model), {
    kvPages: Math.ceil((AGAINST_BATCH * (INPUT_LEN + OUTPUT_LEN)) / 16) + 16,
    threads: availableParallelism(),
    deterministic: DETERMINISTIC,
  });
  const rng = new Rng(1);
  const sampling = samplingParams({ maxTokens: OUTPUT_LEN, ignoreEos: true });
  let best = 0;
  try {
    for (let r = 0; r <= runs; r++) {
      const requests = Array.from({ length: AGAINST_BATCH }, () => ({
        promptIds: Array.from({ length: INPUT_LEN }, () => 3 + rng.int(31_000)),
        sampling,
      }));
      const { timing } = await generate(engine.runner, requests);
      if (r > 0) best = Math.max(best, timing.numDecodeTokens / (timing.decodeMs / 1000)); // run 0 warms up
    }
  } finally {
    await engine.dispose();
  }
  return best;
}
let against: { decodeTokensPerS: number; serveOutputShare: number; serveDecodeShare: number } | undefined;
const level16 = levels.find((l) => l.concurrency === AGAINST_BATCH);
if (AGAINST_DECODE && level16 !== undefined) {
  const decodeTokensPerS = await decodeFigure();
  const serveDecodeRate = AGAINST_BATCH / (level16.tpotMs.median / 1000);
  against = {
    decodeTokensPerS,
    serveOutputShare: level16.outputThroughput / decodeTokensPerS,
    serveDecodeShare: serveDecodeRate / decodeTokensPerS,
  };
  console.log(
    `\nbench:decode's batch-${AGAINST_BATCH} figure, measured now in this process: ${decodeTokensPerS.toFixed(1)} tok/s\n` +
      `serve at concurrency ${AGAINST_BATCH}: output ${level16.outputThroughput.toFixed(1)} tok/s = ${against.serveOutputShare.toFixed(2)}x of it; ` +
      `decode rate (${AGAINST_BATCH} / median TPOT) ${serveDecodeRate.toFixed(1)} tok/s = ${against.serveDecodeShare.toFixed(2)}x (target >= 0.8x)`,
  );
} else if (AGAINST_DECODE) {
  console.log(`\n--against-decode needs concurrency ${AGAINST_BATCH} in --concurrency`);
}
console.log('\nconcurrency  req/s   out tok/s  TTFT p50 (ms)  ITL p50 (ms)  ITL p99 (ms)');
for (const l of levels) {
  console.log(
    `${String(l.concurrency).padStart(11)}  ${l.requestThroughput.toFixed(2).padStart(5)}  ${l.outputThroughput.toFixed(1).padStart(10)}  ` +
      `${l.ttftMs.median.toFixed(1).padStart(13)}  ${l.itlMs.median.toFixed(1).padStart(12)}  ${l.itlMs.p99.toFixed(1).padStart(12)}`,
  );
}
const out = join('bench', 'results', `serve-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(join('bench', 'results'), { recursive: true });
await writeFile(
  out,
  `${JSON.stringify({ model, kernels: server.kernels, deterministic: DETERMINISTIC, inputLen: INPUT_LEN, outputLen: OUTPUT_LEN, cpu: cpus()[0]?.model, threads: availableParallelism(), levels, against: against ?? null }, null, 2)}\n`,
);
const byConcurrency = (y: (l: Level) => number) => levels.map((l) => ({ x: l.concurrency, y: y(l) }));
await writeFile(
  svgPathFor(out),
  linePanelsSvg({
    title: 'Serving: closed-loop streaming clients (tessera serve)',
    subtitle: `${model.split('/').at(-1) ?? model}, ${server.kernels}; input ${INPUT_LEN}, output ${OUTPUT_LEN} tokens; ${cpus()[0]?.model ?? '?'} x ${availableParallelism()}`,
    xLabel: 'concurrency',
    panels: [
      {
        title: 'output throughput',
        unit: 'tokens/s',
        series: [{ name: 'output tok/s', points: byConcurrency((l) => l.outputThroughput) }],
      },
      {
        title: 'time to first token',
        unit: 'ms',
        series: [
          { name: 'median', points: byConcurrency((l) => l.ttftMs.median) },
          { name: 'p99', points: byConcurrency((l) => l.ttftMs.p99) },
        ],
      },
      {
        title: 'inter-token latency',
        unit: 'ms',
        series: [
          { name: 'median', points: byConcurrency((l) => l.itlMs.median) },
          { name: 'p99', points: byConcurrency((l) => l.itlMs.p99) },
        ],
      },
    ],
  }),
);
console.log(`\nwrote ${out} and ${svgPathFor(out)}`);
