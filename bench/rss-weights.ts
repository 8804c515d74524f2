// `npm run bench:rss -- --model FILE.gguf [--weights mmap,copy] [--requests 4] [--max-tokens 8]`:
// the memory of `tessera serve` with a GGUF's weights mapped against read whole, one server at a
// time: VmRSS, RssAnon (the process's own: repacked weights, KV pool, activations, the copy) and
// RssFile (mapped file pages resident now, reclaimable page cache) from /proc after load and after
// some requests, with the load line the server printed and the load average beside the figures.
// Run a copy only where file + repacked weights fit the machine's free memory.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const model = flag('--model', '');
if (model === '') throw new Error('give --model FILE.gguf');
const modes = flag('--weights', 'mmap,copy').split(',');
const requests = Number(flag('--requests', '4'));
const maxTokens = Number(flag('--max-tokens', '8'));
const kvMemory = flag('--kv-memory', '256MiB');
const bin = join(import.meta.dirname, '..', 'bin', 'tessera.js');

function memory(pid: number): Record<string, string> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const out: Record<string, string> = {};
  for (const key of ['VmRSS', 'RssAnon', 'RssFile', 'VmHWM']) {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
    out[key] = m === null ? '?' : `${(Number(m[1]) / 2 ** 20).toFixed(2)} GiB`;
  }
  return out;
}

async function serveOnce(mode: string): Promise<void> {
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      bin,
      'serve',
      '--model',
      model,
      '--weights',
      mode,
      '--port',
      '0',
      '--kv-memory',
      kvMemory,
      '--context-length',
      '2048',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(stdout);
      if (m !== null) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`serve exited (${code}): ${stderr.slice(-2000)}`)));
  });
  const loadS = ((performance.now() - started) / 1000).toFixed(1);
  const afterLoad = memory(child.pid!);
  const t0 = performance.now();
  for (let i = 0; i < requests; i++) {
    const r = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: `Request ${i}: once upon a time`, max_tokens: maxTokens, temperature: 0 }),
    });
    if (r.status !== 200) throw new Error(`request ${i}: HTTP ${r.status} ${await r.text()}`);
    await r.json();
  }
  const requestsS = ((performance.now() - t0) / 1000).toFixed(1);
  const afterRequests = memory(child.pid!);
  const line = /weights (mapped|read)[^\n]*/.exec(stderr)?.[0] ?? '(no weights line)';
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  process.stdout.write(
    `--weights ${mode}: ready in ${loadS} s; ${line}\n` +
      `  after load:                ${JSON.stringify(afterLoad)}\n` +
      `  after ${requests} requests (${requestsS} s): ${JSON.stringify(afterRequests)}\n`,
  );
}

process.stdout.write(
  `bench:rss ${model}; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}\n`,
);
for (const mode of modes) await serveOnce(mode);
process.stdout.write(
  `load average after: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}\n`,
);
