// Issue 17's numbers, for the note (noisy on a shared machine: run both trees in one go and
// compare): `node bench/robust.mjs [ROOT]` against the tree at ROOT (default: this one; another
// checkout's built dist/ for "before").
//   1. RSS of a decode worker holding 3000 silent cluster connections (strangers), and after.
//   2. The longest /health answer while `serve` takes one large body (event-loop freeze).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = process.argv[2] ?? process.cwd();
const BIN = join(ROOT, 'bin', 'tessera.js');
const env = {
  ...process.env,
  TESSERA_CLUSTER_SECRET: 'bench-robust-secret-0123456789abcdef',
  TESSERA_HOME: process.env.TESSERA_HOME ?? join(tmpdir(), 'tessera-bench-robust'),
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

function start(args) {
  const child = spawn(process.execPath, [BIN, ...args, '--model', 'builtin:tiny'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const wait = async (re) => {
    for (let i = 0; i < 1200; i++) {
      const m = re.exec(out);
      if (m) return m;
      await sleep(100);
    }
    throw new Error(`no ${re}: ${out}`);
  };
  return { child, wait, out: () => out };
}

async function idleConnections() {
  const w = start([
    'serve',
    '--role',
    'decode',
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--data-port',
    '0',
    '--context-length',
    '512',
  ]);
  const [, host, port] = await w.wait(/cluster listener on ([\d.]+):(\d+)/);
  await sleep(1000);
  const before = rssMiB(w.child.pid);
  const sockets = [];
  for (let i = 0; i < 3000; i++) {
    const s = connect({ host, port: Number(port) });
    s.on('error', () => undefined);
    s.on('data', () => undefined);
    sockets.push(s);
  }
  await sleep(2500);
  const held = rssMiB(w.child.pid);
  const open = sockets.filter((s) => !s.destroyed).length;
  for (const s of sockets) s.destroy();
  await sleep(6000);
  const after = rssMiB(w.child.pid);
  const lines = w
    .out()
    .split('\n')
    .filter((l) => /refused/.test(l)).length;
  w.child.kill('SIGKILL');
  return {
    rssBeforeMiB: before.toFixed(0),
    rssWith3000MiB: held.toFixed(0),
    stillOpenAfter2_5s: open,
    rssAfterCloseMiB: after.toFixed(0),
    refusalLogLines: lines,
  };
}

async function freeze(label, body) {
  const s = start(['serve', '--host', '127.0.0.1', '--port', '0', '--context-length', '512']);
  const [, url] = await s.wait(/listening on (http:\/\/[\d.]+:\d+)/);
  let worstMs = 0;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const t = performance.now();
      await fetch(`${url}/health`).then(
        (r) => r.arrayBuffer(),
        () => undefined,
      );
      worstMs = Math.max(worstMs, performance.now() - t);
      await sleep(20);
    }
  })();
  const t = performance.now();
  const r = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const answer = `${r.status} ${(await r.text()).slice(0, 90)}`;
  const requestMs = performance.now() - t;
  polling = false;
  await poller;
  s.child.kill('SIGKILL');
  return {
    label,
    bodyMiB: (body.length / 2 ** 20).toFixed(1),
    requestMs: requestMs.toFixed(0),
    worstHealthMs: worstMs.toFixed(0),
    answer,
  };
}

const results = { root: ROOT, idle: await idleConnections() };
const big = (mib) =>
  JSON.stringify({
    model: 'builtin:tiny',
    prompt: 'the cat sat on the mat '.repeat(Math.floor((mib * 2 ** 20) / 23)),
    max_tokens: 1,
  });
const batch = JSON.stringify({
  model: 'builtin:tiny',
  prompt: Array.from({ length: 128 }, (_, i) => `${i} ` + 'a b '.repeat(1500)),
  max_tokens: 1,
});
results.freeze = [await freeze('one 4 MiB prompt', big(4)), await freeze('128 prompts of 6 KB', batch)];
console.log(JSON.stringify(results, null, 2));
