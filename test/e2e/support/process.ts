// E2E support: real `node bin/tessera.js` processes on 127.0.0.1. A server is started with
// --port 0 and found by the "listening on" line it prints; every process is stopped (SIGTERM,
// then SIGKILL) when its test file ends. TESSERA_HOME is a temporary directory per test file,
// where builtin:tiny is generated once.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, beforeAll } from 'vitest';
import { resolveBuiltinModel } from '../../../src/model/index.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'tessera.js');

/** The model e2e processes serve unless a test names one (the CLI's default is builtin:austen). */
export const E2E_MODEL = 'builtin:tiny';
const MODEL_COMMANDS = new Set(['serve', 'plan', 'router', 'up']);

/** `args` with `--model E2E_MODEL` after the command, unless the test gives its own --model. */
export function withTestModel(args: readonly string[]): string[] {
  const [command, ...rest] = args;
  if (command === undefined || !MODEL_COMMANDS.has(command) || rest.includes('--model')) return [...args];
  return [command, '--model', E2E_MODEL, ...rest];
}

/** A temporary TESSERA_HOME with builtin:tiny in it; `remove()` when the file is done. */
export async function testHome(): Promise<{ readonly dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'tessera-e2e-'));
  await resolveBuiltinModel('builtin:tiny', { cacheDir: dir });
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * The file's testHome(), made in a beforeAll and removed in an afterAll. Call it at the top of the
 * file, before the hooks that start processes in it: beforeAll hooks run in order and afterAll
 * hooks in reverse (vitest's `sequence.hooks: 'stack'`), so the home is there before the first
 * process starts and removed after the last one stops. `dir` throws before the hook has run.
 */
export function useTestHome(): { readonly dir: string } {
  let home: Awaited<ReturnType<typeof testHome>> | undefined;
  beforeAll(async () => {
    home = await testHome();
  });
  afterAll(async () => {
    await home?.remove();
  });
  return {
    get dir(): string {
      if (home === undefined) throw new Error('useTestHome: the home is made in beforeAll');
      return home.dir;
    },
  };
}

export async function writeJson(dir: string, name: string, value: unknown): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, JSON.stringify(value));
  return path;
}

export interface Exited {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Every server a test starts has this admin key (TESSERA_ADMIN_KEY); health() sends it, to see the detail. */
export const ADMIN_KEY = 'e2e-admin-key-0123456789abcdef';

function baseEnv(home: string, env: Record<string, string>): NodeJS.ProcessEnv {
  const clean = { ...process.env };
  for (const key of ['TESSERA_FAULT', 'TESSERA_ALLOW_FAULTS', 'TESSERA_CHECK_EVERY_STEP']) delete clean[key];
  return { ...clean, TESSERA_HOME: home, TESSERA_ADMIN_KEY: ADMIN_KEY, ...env };
}

/** Runs a command to its end (it must end within timeoutMs). */
export function runCli(
  args: readonly string[],
  home: string,
  env: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<Exited> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...withTestModel(args)], {
      cwd: ROOT,
      env: baseEnv(home, env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`tessera ${args.join(' ')} did not exit within ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      // 'exit' can come before the pipes drain; 'close' follows once they have.
      child.on('close', () => resolve({ code, signal, stdout, stderr }));
    });
  });
}

export interface Server {
  readonly url: string;
  readonly child: ChildProcess;
  /** What the server printed on stderr so far. */
  stderr(): string;
  /** Resolves when the process exits, whoever ended it. */
  readonly exited: Promise<Exited>;
  /** An openai client for this server (apiKey: a bearer key; any string when the server has none). */
  client(apiKey?: string): OpenAI;
  /** SIGTERM (once; later calls wait for the same exit); resolves with how it exited (SIGKILL after 15 s). */
  stop(): Promise<Exited>;
}

/** Starts `tessera serve --host 127.0.0.1 --port 0 ...args` and waits until it listens. */
export async function startServer(
  args: readonly string[],
  home: string,
  env: Record<string, string> = {},
  timeoutMs = 90_000,
): Promise<Server> {
  const child = spawn(
    process.execPath,
    [BIN, ...withTestModel(['serve', '--host', '127.0.0.1', '--port', '0', ...args])],
    {
      cwd: ROOT,
      env: baseEnv(home, env),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<Exited>((resolve) => {
    child.on('exit', (code, signal) => child.on('close', () => resolve({ code, signal, stdout, stderr })));
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the server did not start within ${timeoutMs} ms\n${stderr}`)),
      timeoutMs,
    );
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(stdout);
      if (match !== null) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    });
    void exited.then((e) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (code ${e.code}, signal ${e.signal}) before listening\n${e.stderr}`));
    });
  });
  let stopping: Promise<Exited> | undefined;
  const stop = async (): Promise<Exited> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const e = await exited;
    clearTimeout(timer);
    return e;
  };
  return {
    url,
    child,
    exited,
    stderr: () => stderr,
    client: (apiKey = 'none') => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 120_000 }),
    stop: () => (stopping ??= stop()),
  };
}

/** The samples of a Prometheus text exposition: `name{labels}` -> value. */
export async function scrape(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

export interface KvPages {
  readonly free: number;
  readonly allocated: number;
  readonly cached: number;
  readonly quarantined: number;
}

export async function kvPages(url: string): Promise<KvPages> {
  const m = await scrape(url);
  const get = (state: string): number => m.get(`tessera_kv_pages{state="${state}"}`) ?? Number.NaN;
  return { free: get('free'), allocated: get('allocated'), cached: get('cached'), quarantined: get('quarantined') };
}

export async function health(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/health`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Polls until `condition` holds (every 20 ms, at most timeoutMs). */
export async function waitUntil(what: string, condition: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** n token ids in [3, 31003), a different sequence for each `first` (a prompt of exactly n tokens, no BOS added). */
export function promptIds(n: number, first = 1000): number[] {
  return Array.from({ length: n }, (_, i) => 3 + ((first + i * 7919) % 31_000));
}
