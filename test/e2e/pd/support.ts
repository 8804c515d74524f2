// E2E support for disaggregated serving: real `node bin/tessera.js` processes on 127.0.0.1 —
// prefill and decode workers (`serve --role ...`), routers, and `tessera up` — found by the
// lines they print, signalled (SIGSTOP/SIGCONT to freeze a phase, SIGKILL to crash), and stopped
// when their test file ends. Traces (TESSERA_TRACE_DIR) are merged across processes and replayed
// through spec/conformance's checkTrace.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll } from 'vitest';
import { checkTrace, type CheckResult } from '../../../spec/conformance/index.js';
import type { TraceEvent } from '../../../src/transfer/index.js';
import {
  ADMIN_KEY,
  health,
  ROOT,
  scrape,
  startServer,
  useTestHome,
  waitUntil,
  withTestModel,
  type Server,
} from '../support/process.js';

export { health, kvPages, promptIds, scrape, testHome, useTestHome, waitUntil } from '../support/process.js';

const BIN = join(ROOT, 'bin', 'tessera.js');
export const SECRET = 'pd-e2e-cluster-secret-0123456789abcdef';

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  stdout(): string;
  stderr(): string;
  /** The first match of pattern in stdout (waits for it; rejects if the process exits first). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM once, SIGKILL after 15 s; resolves with how it exited. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function cleanEnv(home: string, env: Record<string, string>): NodeJS.ProcessEnv {
  const clean = { ...process.env };
  for (const key of [
    'TESSERA_FAULT',
    'TESSERA_ALLOW_FAULTS',
    'TESSERA_CHECK_EVERY_STEP',
    'TESSERA_CLUSTER_SECRET',
    'TESSERA_TRACE_DIR',
    'TESSERA_PD_TIMEOUTS',
    'TESSERA_SUPERVISED',
  ])
    delete clean[key];
  return { ...clean, TESSERA_HOME: home, TESSERA_ADMIN_KEY: ADMIN_KEY, ...env };
}

/** `wrap`: a command prefix to run it under (e.g. `ip netns exec NS`, which execs node in place: same pid). */
export function spawnTessera(
  name: string,
  args: readonly string[],
  home: string,
  env: Record<string, string> = {},
  wrap: readonly string[] = [],
): Proc {
  const argv = [...wrap.slice(1), ...(wrap.length > 0 ? [process.execPath] : []), BIN, ...withTestModel(args)];
  const child = spawn(wrap[0] ?? process.execPath, argv, {
    cwd: ROOT,
    env: cleanEnv(home, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  let stopping: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;
  return {
    name,
    child,
    pid: child.pid as number,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitFor: (pattern, timeoutMs = 120_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${name}: no ${pattern} within ${timeoutMs} ms\n${stderr}`)),
          timeoutMs,
        );
        const check = (): void => {
          const match = pattern.exec(stdout);
          if (match !== null) {
            clearTimeout(timer);
            child.stdout?.off('data', check);
            resolve(match);
          }
        };
        child.stdout?.on('data', check);
        check();
        void exited.then((e) => {
          clearTimeout(timer);
          reject(new Error(`${name} exited (${e.code ?? e.signal}) before printing ${pattern}\n${stderr}`));
        });
      }),
    signal: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    stop: () =>
      (stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGCONT');
          child.kill('SIGTERM');
        }
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        const e = await exited;
        clearTimeout(timer);
        return e;
      })()),
  };
}

export interface Worker extends Proc {
  readonly url: string;
  /** Its cluster (internal) address, host:port. */
  readonly address: string;
}

/** `tessera serve --role <role>` on free ports; resolves once it listens. */
export async function startWorker(
  name: string,
  role: 'prefill' | 'decode',
  args: readonly string[],
  home: string,
  env: Record<string, string> = {},
): Promise<Worker> {
  const p = spawnTessera(
    name,
    ['serve', '--role', role, '--host', '127.0.0.1', '--port', '0', '--data-port', '0', ...args],
    home,
    { TESSERA_CLUSTER_SECRET: SECRET, ...env },
  );
  const url = (await p.waitFor(/listening on (http:\/\/[\d.]+:\d+)/))[1] as string;
  const address = (await p.waitFor(/cluster listener on ([\d.]+:\d+)/))[1] as string;
  return { ...p, url, address };
}

export interface Router extends Proc {
  readonly url: string;
  /** An openai client (apiKey: a bearer key; any string when the router has none). */
  client(apiKey?: string): OpenAI;
}

/** `tessera router` over the given workers; resolves once it listens and every worker is up (or refused by its join checks: misconfigured). */
export async function startRouter(
  name: string,
  prefills: readonly Worker[],
  decodes: readonly Worker[],
  args: readonly string[],
  home: string,
  env: Record<string, string> = {},
): Promise<Router> {
  const p = spawnTessera(
    name,
    [
      'router',
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      ...prefills.flatMap((w) => ['--prefill', w.url]),
      ...decodes.flatMap((w) => ['--decode', w.url]),
      ...args,
    ],
    home,
    {
      TESSERA_CLUSTER_SECRET: SECRET,
      ...env,
    },
  );
  const url = (await p.waitFor(/listening on (http:\/\/[\d.]+:\d+)/))[1] as string;
  await waitUntil(`${name}'s workers to be up`, async () => {
    const h = await health(url);
    return (h.body['workers'] as { state: string }[]).every((w) => w.state === 'up' || w.state === 'misconfigured');
  });
  return {
    ...p,
    url,
    client: (apiKey = 'none') => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 120_000 }),
  };
}

/** A worker's /health detail. */
export async function detail(w: { url: string }): Promise<
  Record<string, unknown> & {
    transfer: Record<string, number>;
    pages: Record<string, number>;
    transport: Record<string, number>;
  }
> {
  return (await health(w.url)).body as never;
}

/** Waits until the router sees every worker that is still alive as up (a frozen one is marked down). */
export async function routerSeesUp(router: { url: string }, alive: readonly { url: string }[]): Promise<void> {
  await waitUntil('the router to see the live workers up', async () => {
    const workers = (await health(router.url)).body['workers'] as { url: string; state: string }[];
    return alive.every((a) => workers.find((w) => w.url === a.url)?.state === 'up');
  });
}

/** Waits until every worker is idle and holds only free or cached pages. */
export async function allIdle(workers: readonly { url: string; name: string }[], timeoutMs = 30_000): Promise<void> {
  await waitUntil(
    `${workers.map((w) => w.name).join(', ')} to be idle`,
    async () => {
      for (const w of workers) {
        const d = await detail(w);
        if (d['idle'] !== true || d.pages['allocated'] !== 0 || d.pages['quarantined'] !== 0) return false;
      }
      return true;
    },
    timeoutMs,
  );
}

/** tessera_kv_transfer_bytes_total of a server's /metrics. */
export async function transferBytes(url: string): Promise<number> {
  return (await scrape(url)).get('tessera_kv_transfer_bytes_total') ?? Number.NaN;
}

export interface Traces {
  readonly events: TraceEvent[];
  readonly writers: Map<string, string>;
}

type TraceLine = { t: number; e?: TraceEvent; writer?: { rid: string; prefill: string } };

/**
 * Every <dir>/*.jsonl of the given directories (one file per process, in its own order), merged
 * by time, causally: the processes' clocks differ by more than a loopback hop takes, so a
 * message's `recv` may carry an earlier time than its `send`. The merge takes the earliest line
 * of any file, except a `recv` whose `send` has not been taken yet, which waits for it.
 */
export async function readTraces(...dirs: string[]): Promise<Traces> {
  const files: TraceLine[][] = [];
  for (const dir of dirs) {
    for (const file of (await readdir(dir)).filter((f) => f.endsWith('.jsonl'))) {
      files.push(
        (await readFile(join(dir, file), 'utf8'))
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line) as TraceLine),
      );
    }
  }
  const inFlight = new Map<string, number>(); // sends taken minus recvs taken, per (from, to, rid, message)
  const key = (from: string, to: string, rid: string, message: string) => JSON.stringify([from, to, rid, message]);
  const ready = (l: TraceLine) =>
    l.e?.kind !== 'recv' || (inFlight.get(key(l.e.peer, l.e.node, l.e.rid, l.e.message)) ?? 0) > 0;
  const merged: TraceLine[] = [];
  const at = files.map(() => 0);
  for (;;) {
    const heads = files.flatMap((f, i) => ((at[i] as number) < f.length ? [i] : []));
    if (heads.length === 0) break;
    const earliest = (candidates: number[]) =>
      candidates.reduce((a, b) =>
        ((files[b] as TraceLine[])[at[b] as number] as TraceLine).t <
        ((files[a] as TraceLine[])[at[a] as number] as TraceLine).t
          ? b
          : a,
      );
    const readyHeads = heads.filter((i) => ready((files[i] as TraceLine[])[at[i] as number] as TraceLine));
    const i = earliest(readyHeads.length > 0 ? readyHeads : heads); // none ready: a recv whose send is in no file
    const line = (files[i] as TraceLine[])[at[i] as number] as TraceLine;
    at[i] = (at[i] as number) + 1;
    merged.push(line);
    const e = line.e;
    if (e?.kind === 'send')
      inFlight.set(
        key(e.node, e.peer, e.rid, e.message),
        (inFlight.get(key(e.node, e.peer, e.rid, e.message)) ?? 0) + 1,
      );
    if (e?.kind === 'recv')
      inFlight.set(
        key(e.peer, e.node, e.rid, e.message),
        (inFlight.get(key(e.peer, e.node, e.rid, e.message)) ?? 0) - 1,
      );
  }
  const writers = new Map<string, string>();
  for (const l of merged) if (l.writer !== undefined) writers.set(l.writer.rid, l.writer.prefill);
  return { events: merged.flatMap((l) => (l.e === undefined ? [] : [l.e])), writers };
}

/** The trace restricted to some requests (and every connection close), checked against the model. */
export function conformance(
  traces: Traces,
  rids: ReadonlySet<string> | undefined,
  complete: boolean,
): CheckResult & { numEvents: number } {
  const events =
    rids === undefined ? traces.events : traces.events.filter((e) => e.kind === 'close' || rids.has(e.rid));
  return { ...checkTrace(events, { complete, writerOf: (rid) => traces.writers.get(rid) }), numEvents: events.length };
}

/** The rids a router's trace file mentions. */
export function ridsOf(traces: Traces, routerNode: string): Set<string> {
  return new Set(traces.events.flatMap((e) => (e.node === routerNode && e.kind !== 'close' ? [e.rid] : [])));
}

/** Completion token ids of a greedy request (vLLM's return_token_ids). */
export async function greedyIds(client: OpenAI, prompt: readonly number[], maxTokens: number): Promise<number[]> {
  const body = {
    model: 'builtin:tiny',
    prompt: [...prompt],
    max_tokens: maxTokens,
    temperature: 0,
    ignore_eos: true,
    return_token_ids: true,
  };
  const response = (await client.completions.create(body as never)) as unknown as {
    choices: { token_ids: number[] }[];
  };
  return response.choices[0]?.token_ids ?? [];
}

/** Resolves true if the process with pid is gone (ESRCH). */
export function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

/** `tessera up` and co-located `tessera serve` with the same args, started side by side (the PD-equals-serve tests). */
export interface UpBesideServe {
  readonly colocated: Server;
  /** The router's URL (`tessera up` prints it). */
  readonly routerUrl: string;
  /** The official client on the router. */
  readonly pd: OpenAI;
  stop(): Promise<void>;
}

export async function upBesideServe(args: readonly string[], homeDir: string): Promise<UpBesideServe> {
  const cluster = spawnTessera('up', ['up', '--port', '0', ...args], homeDir);
  const [colocated, routerUrl] = await Promise.all([
    startServer(args, homeDir),
    cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/).then((m) => m[1] as string),
  ]).catch(async (error: unknown) => {
    await cluster.stop(); // a failed start leaves no process behind (serve's own start stops itself)
    throw error;
  });
  const pd = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
  return { colocated, routerUrl, pd, stop: async () => void (await Promise.all([cluster.stop(), colocated.stop()])) };
}

/**
 * upBesideServe for a whole test file, in the file's own test home (useTestHome): started in a
 * beforeAll, stopped in an afterAll. Call it at the top of the file; its fields throw until the
 * hook has run.
 */
export function useUpBesideServe(args: readonly string[]): Omit<UpBesideServe, 'stop'> {
  const home = useTestHome();
  let up: UpBesideServe | undefined;
  beforeAll(async () => {
    up = await upBesideServe(args, home.dir);
  });
  afterAll(async () => {
    await up?.stop();
  });
  const started = (): UpBesideServe => {
    if (up === undefined) throw new Error('useUpBesideServe: started in beforeAll');
    return up;
  };
  return {
    get colocated() {
      return started().colocated;
    },
    get routerUrl() {
      return started().routerUrl;
    },
    get pd() {
      return started().pd;
    },
  };
}
