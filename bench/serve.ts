// Serving benchmark (`npm run bench:serve`): a real `tessera serve` process beside llama.cpp's own
// `llama-server -np N` (built natively by scripts/build-llama.mjs, on the same GGUF file and the
// same thread count: every core), both driven by the same closed-loop streaming clients (the
// official openai client, greedy completions of token-id prompts, ignore_eos) at several
// concurrencies, taking turns level by level while both processes stay up. Per server and
// concurrency: request throughput, output and total token throughput, TTFT, TPOT and
// inter-token latency (mean, median, p99), printed in the layout of vLLM's benchmark_serving, then
// the comparison table (model | measure | Tessera | llama.cpp | ratio), written to
// bench/results/serve-<time>.json. A benchmark, not a test: it asserts nothing about speed.
//
// Like for like: both servers get the same prompts and max_tokens with ignore_eos, and a request
// counts only when its usage says it generated exactly max_tokens (bench/lib/serve-load.ts).
// llama-server's completions run their text through common/chat.cpp's Content-only parser, which
// fails on text that is not valid UTF-8 (common/peg-parser.cpp) and answers HTTP 500 "The model
// produced output that does not match the expected Content-only format": on a random-weight model
// with SentencePiece byte tokens, about one request in five of 64 tokens samples a lone byte
// 0x80-0xFF. So llama-server's requests carry a logit_bias of -inf on those byte tokens (<0x80> ..
// <0xFF>, found in the GGUF's vocabulary): its sampler already applies a logit_bias on every token
// with ignore_eos (its end-of-generation tokens), so this adds 128 additions to a pass over the
// vocabulary, and no request fails. Tessera accepts no logit_bias and needs none (its text output
// keeps invalid bytes as U+FFFD). --llama-logit-bias none sends none (the failures come back,
// counted per side). A level where either side failed requests is marked not like for like.
//
//   node --import ./bench/lib/register-ts.mjs bench/serve.ts [--quick] [--concurrency 1,4,16]
//        [--input-len 128] [--output-len 64] [--prompts-per-client 4] [--models m100:q4_0]
//        [--model PATH] [--deterministic] [--no-llama] [--against-decode] [--llama-logit-bias none]
//        [--tessera-args '--max-step-ms 40']
// --models: gen-model preset:dtype pairs (files cached in BENCH_MODEL_DIR, default
// bench/results/models), default m100:q4_0; --model PATH: one GGUF file instead.
// llama-server gets -np = the largest concurrency and that many slots of input + output + 16 tokens.
// --against-decode: after the servers have stopped, the same process measures bench:decode's figure
// for the same model and lengths (the engine in this process, 16 prompts of --input-len decoding
// --output-len tokens each, decode tokens/s over decode time, best of 3) and prints serve's
// concurrency-16 throughput beside it: the output token throughput (prefill and request turnover
// included) and the decode rate (16 / median TPOT), each as a fraction of the decode figure.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, homedir, loadavg } from 'node:os';
import { basename, join } from 'node:path';
import { Rng, samplingParams } from '../src/core/index.js';
import { readGguf } from '../src/formats/index.js';
import { createEngine, generate } from '../src/engine/index.js';
import { loadModel } from '../src/model/index.js';
import { startLlamaServer, llamaNativeBin, type LlamaServer } from './lib/llama-native.js';
import { printLevel, runLevel, type ExtraBody, type Level, type LoadShape } from './lib/serve-load.js';
import { linePanelsSvg, svgPathFor } from './lib/svg-plot.js';
import { benchModel, parseModels, printYardstick, ratioOf, specLabel, type YardstickRow } from './lib/yardstick.js';

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
const LLAMA_BIAS = flag('--llama-logit-bias') !== 'none';
/** --tessera-args '--max-step-ms 40': more options for `tessera serve` (printed in the header). */
const TESSERA_ARGS = (flag('--tessera-args') ?? '').split(' ').filter((a) => a !== '');
const THREADS = availableParallelism();
const HOME = process.env['TESSERA_HOME'] ?? join(homedir(), '.cache', 'tessera');
const NAME = 'bench-model';
/** Opens /dashboard/state, whose engine-loop counters give where a level's wall time went. */
const ADMIN_KEY = `bench-serve-admin-${process.pid}`;

/** The models to serve: --model PATH, else --models' presets (cached files). */
async function models(): Promise<{ label: string; path: string }[]> {
  const path = flag('--model');
  if (path !== undefined) return [{ label: basename(path), path }];
  const specs = parseModels(flag('--models') ?? process.env['BENCH_MODELS'] ?? 'm100:q4_0');
  const out: { label: string; path: string }[] = [];
  for (const spec of specs) out.push({ label: specLabel(spec), path: await benchModel(spec) });
  return out;
}

interface Server {
  readonly url: string;
  readonly kernels: string;
  stop(): Promise<void>;
}

async function startTessera(model: string): Promise<Server> {
  const maxRunning = String(Math.max(16, ...CONCURRENCY));
  const child: ChildProcess = spawn(
    process.execPath,
    [
      'bin/tessera.js',
      'serve',
      '--model',
      model,
      '--served-model-name',
      NAME,
      '--port',
      '0',
      '--max-running-requests',
      maxRunning,
      '--admin-key',
      ADMIN_KEY,
      ...(DETERMINISTIC ? ['--deterministic'] : []),
      ...TESSERA_ARGS,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, TESSERA_HOME: HOME } },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  let out = '';
  let listening = false;
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the server exited with code ${code} before listening`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
      if (url === undefined || listening) return;
      listening = true;
      void kernelLabel(url).then((kernels) => resolve({ url, stop, kernels }));
    });
  });
}

interface LoopCounters {
  readonly numSteps: number;
  readonly numTokensSampled: number;
  readonly stepMsTotal: number;
  readonly numItemsStepped: number;
}

/** The kernels the server chose: the summary in its `tessera plan` lines (/dashboard/state), or '?'. */
async function kernelLabel(url: string): Promise<string> {
  try {
    const res = await fetch(`${url}/dashboard/state?key=${ADMIN_KEY}`);
    const view = (await res.json()) as { plan?: readonly string[] };
    const line = view.plan?.find((l) => l.startsWith('kernels: '));
    return line?.replace(/^kernels: --kernels \S+ -> /, '') ?? '?';
  } catch {
    return '?';
  }
}

/** Tessera's engine-loop counters (/dashboard/state), or null where the page does not answer. */
async function loopCounters(url: string): Promise<LoopCounters | null> {
  try {
    const res = await fetch(`${url}/dashboard/state?key=${ADMIN_KEY}`);
    if (res.status !== 200) return null;
    const view = (await res.json()) as { map?: { loop?: LoopCounters } };
    return view.map?.loop ?? null;
  } catch {
    return null;
  }
}

/** Where a Tessera level's time went: steps, time inside runner.step against the level's wall time. */
function loopShare(before: LoopCounters | null, after: LoopCounters | null, level: Level) {
  if (before === null || after === null) return null;
  const steps = after.numSteps - before.numSteps;
  const stepMs = after.stepMsTotal - before.stepMsTotal;
  return {
    steps,
    stepMs,
    /** Time inside runner.step over the level's wall time (its warm-up request included in the steps). */
    stepShare: stepMs / (level.durationS * 1000),
    meanStepMs: stepMs / steps,
    itemsPerStep: (after.numItemsStepped - before.numItemsStepped) / steps,
    sampled: after.numTokensSampled - before.numTokensSampled,
  };
}

/** The ids of the byte tokens <0x80> .. <0xFF> in the GGUF's vocabulary (none in a byte-level BPE one). */
async function highByteTokens(model: string): Promise<number[]> {
  const tokens = readGguf(new Uint8Array(await readFile(model)), model).metadata.get('tokenizer.ggml.tokens');
  if (tokens?.type !== 'array') return [];
  return tokens.items.flatMap((piece, id) =>
    typeof piece === 'string' && /^<0x[89A-F][0-9A-F]>$/.test(piece) ? [id] : [],
  );
}

/** bench:decode's figure in this process: decode tok/s of AGAINST_BATCH requests, best of `runs`. */
async function decodeFigure(model: string, runs = 3): Promise<number> {
  const engine = await createEngine(await loadModel(model), {
    kvPages: Math.ceil((AGAINST_BATCH * (INPUT_LEN + OUTPUT_LEN)) / 16) + 16,
    threads: THREADS,
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

const found = llamaNativeBin();
if (!('bin' in found)) process.stderr.write(`llama-server is unavailable (${found.why}): Tessera alone\n`);
const bin = 'bin' in found ? found.bin : null;
const shape: LoadShape = {
  inputLen: INPUT_LEN,
  outputLen: OUTPUT_LEN,
  promptsPerClient: PROMPTS_PER_CLIENT,
  modelName: NAME,
};
console.log(
  `# Serving benchmark on ${cpus()[0]?.model ?? '?'} x ${THREADS} (load average ${loadavg()[0]!.toFixed(1)}); ` +
    `input ${INPUT_LEN}, output ${OUTPUT_LEN} tokens, greedy, ignore_eos; ` +
    `tessera serve${TESSERA_ARGS.length === 0 ? '' : ` ${TESSERA_ARGS.join(' ')}`} beside ` +
    (bin === null ? 'nothing' : `llama-server -np ${Math.max(...CONCURRENCY)} -t ${THREADS}`) +
    ', taking turns per level',
);

interface ModelRun {
  readonly label: string;
  readonly path: string;
  readonly kernels: string;
  readonly tessera: Level[];
  /** Per level: Tessera's engine-loop counters over it (null: /dashboard/state did not answer). */
  readonly tesseraLoop: (ReturnType<typeof loopShare> | null)[];
  readonly llama: Level[];
  /** Byte tokens llama-server's requests bias to -inf (see the header). */
  readonly llamaBannedTokens: number;
  /** Concurrencies where either side failed requests (their ratios compare unlike work). */
  readonly unsound: number[];
  against: { decodeTokensPerS: number; serveOutputShare: number; serveDecodeShare: number } | null;
}
const runs: ModelRun[] = [];
const yard: YardstickRow[] = [];
for (const { label, path } of await models()) {
  const tessera = await startTessera(path);
  let llama: LlamaServer | null = null;
  const banned = LLAMA_BIAS ? await highByteTokens(path) : [];
  const llamaExtra: ExtraBody = banned.length === 0 ? {} : { logit_bias: banned.map((id) => [id, false]) };
  const run: ModelRun = {
    label,
    path,
    kernels: tessera.kernels,
    tessera: [],
    tesseraLoop: [],
    llama: [],
    llamaBannedTokens: banned.length,
    unsound: [],
    against: null,
  };
  try {
    if (bin !== null)
      llama = await startLlamaServer(bin, {
        model: path,
        threads: THREADS,
        parallel: Math.max(...CONCURRENCY),
        slotContext: INPUT_LEN + OUTPUT_LEN + 16,
      });
    console.log(`\n# ${label}: ${path} (tessera: ${tessera.kernels})`);
    if (llama !== null)
      console.log(
        banned.length === 0
          ? '# llama-server: no logit_bias (its Content-only parser answers 500 to output that is not valid UTF-8)'
          : `# llama-server: logit_bias -inf on the ${banned.length} byte tokens <0x80>..<0xFF> (ids ${banned[0]}..${banned.at(-1)}), ` +
              'which its Content-only parser would reject',
      );
    for (const c of CONCURRENCY) {
      const countersBefore = await loopCounters(tessera.url);
      const ours = await runLevel(tessera.url, shape, c, c);
      const share = loopShare(countersBefore, await loopCounters(tessera.url), ours);
      run.tessera.push(ours);
      run.tesseraLoop.push(share);
      printLevel('tessera', ours);
      if (share !== null)
        console.log(
          `tessera's engine loop: ${share.steps} steps, ${share.stepMs.toFixed(0)} ms inside runner.step = ` +
            `${(100 * share.stepShare).toFixed(0)}% of the level's ${ours.durationS.toFixed(2)} s; ` +
            `mean step ${share.meanStepMs.toFixed(2)} ms, ${share.itemsPerStep.toFixed(1)} items/step, ${share.sampled} tokens sampled`,
        );
      if (llama !== null) {
        const theirs = await runLevel(llama.url, shape, c, c, llamaExtra);
        run.llama.push(theirs);
        printLevel('llama-server', theirs);
      }
      const theirs = run.llama.at(-1);
      if (ours.failed > 0 || (theirs?.failed ?? 0) > 0) {
        run.unsound.push(c);
        console.log(
          `# NOT LIKE FOR LIKE at ${c} streams: tessera failed ${ours.failed}, llama-server ${theirs?.failed ?? 0} ` +
            `of ${c * PROMPTS_PER_CLIENT} requests; its throughput ratio compares unlike work`,
        );
      }
      const row = (measure: string, better: 'higher' | 'lower', pick: (l: Level) => number): YardstickRow => ({
        model: label,
        measure: `${c} streams: ${measure}`,
        tessera: pick(ours),
        llama: llama === null || theirs === undefined ? NaN : pick(theirs),
        tesseraRuns: [],
        llamaRuns: [],
        better,
      });
      yard.push(
        row('output tok/s', 'higher', (l) => l.outputThroughput),
        row('TTFT p50 ms', 'lower', (l) => l.ttftMs.median),
        row('ITL p50 ms', 'lower', (l) => l.itlMs.median),
        row('ITL p99 ms', 'lower', (l) => l.itlMs.p99),
        row(`failed requests of ${c * PROMPTS_PER_CLIENT}`, 'lower', (l) => l.failed),
      );
    }
  } finally {
    await Promise.all([tessera.stop(), llama?.stop()]);
  }
  const level16 = run.tessera.find((l) => l.concurrency === AGAINST_BATCH);
  if (AGAINST_DECODE && level16 !== undefined) {
    const decodeTokensPerS = await decodeFigure(path);
    const serveDecodeRate = AGAINST_BATCH / (level16.tpotMs.median / 1000);
    run.against = {
      decodeTokensPerS,
      serveOutputShare: level16.outputThroughput / decodeTokensPerS,
      serveDecodeShare: serveDecodeRate / decodeTokensPerS,
    };
    console.log(
      `\n${label}: bench:decode's batch-${AGAINST_BATCH} figure, measured now in this process: ${decodeTokensPerS.toFixed(1)} tok/s\n` +
        `serve at concurrency ${AGAINST_BATCH}: output ${level16.outputThroughput.toFixed(1)} tok/s = ${run.against.serveOutputShare.toFixed(2)}x of it; ` +
        `decode rate (${AGAINST_BATCH} / median TPOT) ${serveDecodeRate.toFixed(1)} tok/s = ${run.against.serveDecodeShare.toFixed(2)}x (target >= 0.8x)`,
    );
  } else if (AGAINST_DECODE) {
    console.log(`\n--against-decode needs concurrency ${AGAINST_BATCH} in --concurrency`);
  }
  runs.push(run);
}
printYardstick(
  `Serving, tessera serve vs llama-server -np ${Math.max(...CONCURRENCY)}, ${THREADS} threads each (ratio > 1: Tessera ahead)`,
  yard,
);
const out = join('bench', 'results', `serve-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(join('bench', 'results'), { recursive: true });
await writeFile(
  out,
  `${JSON.stringify(
    {
      deterministic: DETERMINISTIC,
      llamaLogitBias: LLAMA_BIAS,
      inputLen: INPUT_LEN,
      outputLen: OUTPUT_LEN,
      cpu: cpus()[0]?.model,
      threads: THREADS,
      llama: bin,
      runs,
      yardstick: yard.map((r) => ({ ...r, ratio: ratioOf(r) })),
    },
    null,
    2,
  )}\n`,
);
const series = (name: string, levels: Level[], y: (l: Level) => number) =>
  levels.length === 0 ? [] : [{ name, points: levels.map((l) => ({ x: l.concurrency, y: y(l) })) }];
const both = (y: (l: Level) => number, what = '') =>
  runs.flatMap((r) => [
    ...series(`tessera ${r.label}${what}`, r.tessera, y),
    ...series(`llama-server ${r.label}${what}`, r.llama, y),
  ]);
await writeFile(
  svgPathFor(out),
  linePanelsSvg({
    title: 'Serving: closed-loop streaming clients, tessera serve vs llama-server',
    subtitle: `input ${INPUT_LEN}, output ${OUTPUT_LEN} tokens; ${cpus()[0]?.model ?? '?'} x ${THREADS}`,
    xLabel: 'concurrency',
    panels: [
      { title: 'output throughput', unit: 'tokens/s', series: both((l) => l.outputThroughput) },
      { title: 'time to first token, median', unit: 'ms', series: both((l) => l.ttftMs.median) },
      { title: 'inter-token latency, p99', unit: 'ms', series: both((l) => l.itlMs.p99) },
    ],
  }),
);
console.log(`\nwrote ${out} and ${svgPathFor(out)}`);
