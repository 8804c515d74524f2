// llama.cpp's own tools, built natively (scripts/build-llama.mjs), as the speed yardstick of
// bench:decode, bench:prefill and bench:serve: llama-bench for prompt processing and token
// generation at a context depth (`-p`, `-n`, `-d`), and llama-server for serving. Benchmark code:
// it builds llama.cpp when the cached build is missing (minutes, once per bundle), runs the
// binaries on the caller's GGUF file at the caller's thread count, and never measures Tessera.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** llama.cpp's builds (scripts/build-llama.mjs --variant): this CPU's instruction set, or its AVX2 path. */
export type LlamaBuild = 'native' | 'avx2';

/** The llama.cpp build that matches a Tessera --cpu choice: its AVX2 build for avx2, else native. */
export const llamaBuildFor = (cpu: string): LlamaBuild => (cpu === 'avx2' ? 'avx2' : 'native');

/**
 * The directory holding llama-bench and llama-server (`variant`: which build), building them first when missing; why not,
 * when they cannot be built or the run asked for none (--no-llama, BENCH_NO_LLAMA=1); BENCH_LLAMA_BIN:
 * a directory of one's own llama-bench and llama-server instead.
 */
export function llamaNativeBin(variant: LlamaBuild = 'native'): { bin: string } | { why: string } {
  if (process.argv.includes('--no-llama') || process.env['BENCH_NO_LLAMA'] === '1')
    return { why: '--no-llama / BENCH_NO_LLAMA=1' };
  // A llama.cpp built elsewhere (its build/bin): compared as it is.
  const own = process.env['BENCH_LLAMA_BIN'];
  if (own !== undefined && own !== '') return { bin: own };
  const script = join('scripts', 'build-llama.mjs');
  try {
    const out = execFileSync(process.execPath, [script, '--variant', variant], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const bin = out.trim().split('\n').at(-1) ?? '';
    return bin === '' ? { why: `${script} printed no directory` } : { bin };
  } catch (error) {
    return { why: `${script} failed: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}` };
  }
}

export interface LlamaBenchRun {
  /** Prompt tokens (pp) or generated tokens (tg) per second: llama-bench's avg_ts. */
  readonly tokensPerSecond: number;
  readonly stddev: number;
  /** Every repetition's tokens/s. */
  readonly samples: number[];
}

/**
 * One llama-bench test: `prompt` tokens processed (pp, n = 0) or `gen` tokens generated (tg,
 * prompt = 0), after `depth` tokens already in the context (untimed), on `threads` threads.
 */
export async function llamaBench(
  bin: string,
  o: { model: string; threads: number; prompt: number; gen: number; depth: number; reps: number; batch?: number },
): Promise<LlamaBenchRun> {
  const args = [
    '-m',
    o.model,
    '-t',
    String(o.threads),
    '-p',
    String(o.prompt),
    '-n',
    String(o.gen),
    '-d',
    String(o.depth),
    '-r',
    String(o.reps),
    ...(o.batch === undefined ? [] : ['-b', String(o.batch), '-ub', String(o.batch)]),
    '-o',
    'json',
  ];
  const { stdout } = await run(join(bin, 'llama-bench'), args, { maxBuffer: 1 << 24 });
  const tests = JSON.parse(stdout) as { avg_ts: number; stddev_ts: number; samples_ts?: number[] }[];
  const t = tests[0];
  if (t === undefined) throw new Error(`llama-bench ${args.join(' ')} reported no test`);
  return { tokensPerSecond: t.avg_ts, stddev: t.stddev_ts, samples: t.samples_ts ?? [t.avg_ts] };
}

/** A free TCP port on 127.0.0.1 (llama-server takes no port 0). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export interface LlamaServer {
  readonly url: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * llama-server on `model` with `parallel` slots (-np), each of `slotContext` tokens, on `threads`
 * threads, listening on 127.0.0.1; resolves once /health answers 200 (the model loaded).
 */
export async function startLlamaServer(
  bin: string,
  o: { model: string; threads: number; parallel: number; slotContext: number; extraArgs?: readonly string[] },
): Promise<LlamaServer> {
  const port = await freePort();
  const child = spawn(
    join(bin, 'llama-server'),
    [
      '-m',
      o.model,
      '-t',
      String(o.threads),
      '-tb',
      String(o.threads),
      '-np',
      String(o.parallel),
      '-c',
      String(o.parallel * o.slotContext),
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--no-webui',
      ...(o.extraArgs ?? []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited (${child.exitCode}):\n${log}`);
    try {
      if ((await fetch(`${url}/health`)).status === 200) return { url, child, stop };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`llama-server did not become healthy in 120 s:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** One llama-batched-bench line: `parallel` sequences, each `gen` tokens after its own prompt. */
export interface LlamaBatchedRun {
  readonly parallel: number;
  /** Generated tokens per second over all sequences (speed_tg: pl · tg / t_tg). */
  readonly tgTokensPerSecond: number;
}

/**
 * llama.cpp's llama-batched-bench (scripts/build-llama.mjs --examples DIR: DIR/bin/llama-batched-bench)
 * on `model`: for each of `parallel`, that many sequences of `prompt` tokens each (not shared) then
 * `gen` decode steps of one token per sequence, on `threads` threads; its decode rate per line.
 */
export async function llamaBatchedBench(
  exe: string,
  o: { model: string; threads: number; prompt: number; gen: number; parallel: readonly number[] },
): Promise<LlamaBatchedRun[]> {
  const most = Math.max(...o.parallel);
  const args = ['-m', o.model, '-t', String(o.threads), '-tb', String(o.threads)];
  args.push('-c', String(most * (o.prompt + o.gen) + 64), '-b', '512', '-ub', '512');
  args.push('-npp', String(o.prompt), '-ntg', String(o.gen), '-npl', o.parallel.join(','), '--output-format', 'jsonl');
  const { stdout } = await run(exe, args, { maxBuffer: 1 << 24 });
  const lines = stdout.split('\n').filter((l) => l.startsWith('{'));
  const parsed = lines.map((l) => JSON.parse(l) as { pl: number; speed_tg: number });
  if (parsed.length !== o.parallel.length)
    throw new Error(`llama-batched-bench ${args.join(' ')}: ${parsed.length} lines`);
  return parsed.map((p) => ({ parallel: p.pl, tgTokensPerSecond: p.speed_tg }));
}
