// bench:findings' helpers (bench/findings-33.ts): real servers started with two API keys, the
// openai client's status of a call, and a call watched by /health polls (the event loop's stall
// as a stranger sees it).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

export const KEY_A = 'sk-findings-alice';
export const KEY_B = 'sk-findings-bob';
export const ADMIN = 'sk-findings-admin';

/** A running server (serve or up) and its stdout so far. */
export interface Proc {
  readonly url: string;
  readonly child: ChildProcess;
  out: string;
}

export async function start(
  command: 'serve' | 'up',
  model: string,
  extra: string[] = [],
  shellPrefix = '',
): Promise<Proc> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-findings-'));
  const keys = join(dir, 'keys.json');
  writeFileSync(keys, JSON.stringify({ [KEY_A]: 'alice', [KEY_B]: 'bob' }));
  const argv = [
    'bin/tessera.js',
    command,
    '--model',
    model,
    '--served-model-name',
    'm',
    '--port',
    '0',
    '--api-keys',
    keys,
    '--admin-key',
    ADMIN,
    ...extra,
  ];
  const child =
    shellPrefix === ''
      ? spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('bash', ['-c', `${shellPrefix}; exec "$0" "$@"`, process.execPath, ...argv], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
  const proc = { url: '', child, out: '' };
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`${command} exited with code ${code} before listening`)));
    // `up` forwards its workers' lines (the decode's cluster listener among them) on either stream.
    child.stderr?.on('data', (d: Buffer) => (proc.out += d.toString()));
    child.stdout?.on('data', (d: Buffer) => {
      proc.out += d.toString();
      const re =
        command === 'up' ? /^tessera: listening on (http:\/\/[\d.]+:\d+)/m : /listening on (http:\/\/[\d.]+:\d+)/;
      const url = re.exec(proc.out)?.[1];
      if (url !== undefined && proc.url === '') resolve(Object.assign(proc, { url }));
    });
  });
}

export const client = (p: Proc, key = KEY_A): OpenAI =>
  new OpenAI({ baseURL: `${p.url}/v1`, apiKey: key, maxRetries: 0, timeout: 600_000 });

/** The status of a call through the openai client (200, or the APIError's status), and its message. */
export async function statusOf(call: Promise<unknown>): Promise<{ status: number; message: string; value?: unknown }> {
  try {
    const value = await call;
    return { status: 200, message: '', value };
  } catch (error) {
    if (error instanceof OpenAI.APIError)
      return { status: error.status ?? 0, message: error.message.replace(/^\d{3} /, '') };
    return { status: 0, message: String(error) };
  }
}

/** POSTs a JSON body (already a string, to time only the server); status, ms, and the longest /health answer meanwhile. */
export async function postWatched(
  p: Proc,
  path: string,
  body: string,
  key = KEY_A,
): Promise<{ status: number; ms: number; healthMaxMs: number; text: string }> {
  return watched(p, async () => {
    const r = await fetch(`${p.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body,
    });
    return { status: r.status, text: await r.text() };
  });
}

/** Runs `work` while /health is polled every 25 ms; its result with the ms it took and the longest /health answer. */
export async function watched<T extends object>(
  p: Proc,
  work: () => Promise<T>,
): Promise<T & { ms: number; healthMaxMs: number }> {
  let done = false;
  let healthMaxMs = 0;
  const poll = (async () => {
    while (!done) {
      const t = performance.now();
      await fetch(`${p.url}/health`).then((r) => r.arrayBuffer());
      if (!done) healthMaxMs = Math.max(healthMaxMs, performance.now() - t);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  })();
  const t0 = performance.now();
  const result = await work();
  const ms = performance.now() - t0;
  done = true;
  await poll;
  return { ...result, ms, healthMaxMs };
}

export const fmt = (ms: number): string => (ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(0)} ms`);

export const schemaFormat = (schema: Record<string, unknown>) =>
  ({ type: 'json_schema', json_schema: { name: 'out', schema, strict: true } }) as const;
