// bench/embeddings.ts: /v1/embeddings throughput of `tessera serve` against llama-server
// --embedding --pooling last (llama.cpp's own build, scripts/build-llama.mjs) on the same GGUF
// at the same thread count (Tessera uses every core; llama-server gets -t/-tb = that count),
// rounds interleaved (T L T L ...), each round one request of BATCH inputs of about WORDS words,
// for each batch size of --batches (default 1 and 16). Prints, per engine and batch size (median
// of rounds), requests/s, inputs/s and prompt tokens/s (each engine's own `usage.prompt_tokens`),
// the ratios, the load average before and after (these machines are shared), and how close the two
// engines' vectors are (cosine of each input's two vectors: both are last-token, L2-normalised).
//
//   node --import ./bench/lib/register-ts.mjs bench/embeddings.ts [--model m100:f32 | --file X.gguf]
//        [--rounds 5] [--batches 1,16] [--words 48] [--llama-args '--poll 0']
import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { llamaNativeBin } from './lib/llama-native.js';
import { benchModel, median, parseModels } from './lib/yardstick.js';

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const [SPEC] = parseModels(arg('--model', 'm100:f32'));
const ROUNDS = Number(arg('--rounds', '5'));
const BATCHES = arg('--batches', arg('--batch', '1,16')).split(',').map(Number);
const FILE = arg('--file', '');
/** Extra llama-server flags, space-separated (e.g. `--poll 0`: no spin-waiting on a shared machine). */
const LLAMA_ARGS = arg('--llama-args', '')
  .split(' ')
  .filter((a) => a !== '');
const WORDS = Number(arg('--words', '48'));
const THREADS = availableParallelism();
const SLOTS = Number(arg('--slots', '8'));
const VOCAB = 'the quick brown fox jumps over a lazy dog while seven small birds sing near old river stones'.split(' ');

/** Inputs unique across rounds and batch sizes from their first word, so no engine reuses a cached prefix. */
function inputs(round: number, batch: number): string[] {
  return Array.from(
    { length: batch },
    (_, i) =>
      `${batch * 100_000 + round * 1000 + i} ` +
      Array.from({ length: WORDS }, (_, w) => VOCAB[(round * 31 + i * 7 + w * w) % VOCAB.length]).join(' '),
  );
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function started(child: ChildProcess, url: () => Promise<string>): { url: Promise<string>; stop: () => Promise<void> } {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    url: url(),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

async function tessera(model: string) {
  const child = spawn(process.execPath, ['bin/tessera.js', 'serve', '--model', model, '--port', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return started(
    child,
    () =>
      new Promise((resolve, reject) => {
        let out = '';
        child.once('exit', (code) => reject(new Error(`tessera exited (${code})`)));
        child.stdout?.on('data', (d: Buffer) => {
          out += d.toString();
          const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
          if (url !== undefined) resolve(url);
        });
      }),
  );
}

async function llamaServer(bin: string, model: string) {
  const port = await freePort();
  const child = spawn(
    join(bin, 'llama-server'),
    // 8 slots: a request's inputs run side by side across slots, as Tessera batches them.
    ['-m', model, '--embedding', '--pooling', 'last', '-t', String(THREADS), '-tb', String(THREADS)].concat([
      '-np',
      String(SLOTS),
      '-c',
      '4096',
      '-b',
      '2048',
      '-ub',
      '2048',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--no-webui',
      ...LLAMA_ARGS,
    ]),
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const url = `http://127.0.0.1:${port}`;
  return started(child, async () => {
    for (let i = 0; i < 600; i++) {
      if (child.exitCode !== null) throw new Error('llama-server exited');
      const ok = await fetch(`${url}/health`)
        .then((r) => r.status === 200)
        .catch(() => false);
      if (ok) return url;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('llama-server did not start');
  });
}

async function embed(url: string, input: string[]): Promise<{ ms: number; tokens: number; vectors: number[][] }> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/embeddings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input, encoding_format: 'float' }),
  });
  if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status} ${await res.text()}`);
  const body = (await res.json()) as {
    data: { index: number; embedding: number[] }[];
    usage?: { prompt_tokens?: number };
  };
  const ms = performance.now() - t0;
  const vectors = [...body.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
  return { ms, tokens: body.usage?.prompt_tokens ?? Number.NaN, vectors };
}

const cosine = (a: number[], b: number[]) => {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) [ab, aa, bb] = [ab + a[i]! * b[i]!, aa + a[i]! ** 2, bb + b[i]! ** 2];
  return ab / Math.sqrt(aa * bb);
};

const load = (): string =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  if (SPEC === undefined) throw new Error('--model');
  const model = FILE !== '' ? FILE : await benchModel(SPEC);
  const native = llamaNativeBin();
  if ('why' in native) throw new Error(`no llama-server: ${native.why}`);
  const [t, l] = [await tessera(model), await llamaServer(native.bin, model)];
  try {
    const [tUrl, lUrl] = [await t.url, await l.url];
    await embed(tUrl, inputs(99, 16)); // warm-up both
    await embed(lUrl, inputs(99, 16));
    const loadBefore = load();
    const rows: string[] = [];
    let worst = 1;
    for (const batch of BATCHES) {
      const runs: { tessera: { ms: number; tokens: number }[]; llama: { ms: number; tokens: number }[] } = {
        tessera: [],
        llama: [],
      };
      for (let round = 0; round < ROUNDS; round++) {
        const a = await embed(tUrl, inputs(round, batch));
        const b = await embed(lUrl, inputs(round, batch));
        runs.tessera.push(a);
        runs.llama.push(b);
        a.vectors.forEach((v, i) => (worst = Math.min(worst, cosine(v, b.vectors[i] ?? []))));
      }
      const rates = (list: { ms: number; tokens: number }[]) => ({
        rps: median(list.map((r) => 1000 / r.ms)),
        tps: median(list.map((r) => (r.tokens * 1000) / r.ms)),
        tokens: median(list.map((r) => r.tokens)),
      });
      const [rt, rl] = [rates(runs.tessera), rates(runs.llama)];
      rows.push(
        `  batch ${String(batch).padStart(2)}  tessera ${rt.rps.toFixed(2)} req/s ${(rt.rps * batch).toFixed(1)} inputs/s ${rt.tps.toFixed(0)} tok/s` +
          ` | llama-server ${rl.rps.toFixed(2)} req/s ${(rl.rps * batch).toFixed(1)} inputs/s ${rl.tps.toFixed(0)} tok/s` +
          ` | ratio ${(rt.rps / rl.rps).toFixed(2)}x (prompt tokens per request: tessera ${rt.tokens}, llama ${rl.tokens})`,
      );
    }
    console.log(
      `embeddings: ${FILE !== '' ? FILE : `${SPEC.preset} ${SPEC.dtype}`}, ${THREADS} threads` +
        (LLAMA_ARGS.length === 0 ? '' : ` (llama-server ${LLAMA_ARGS.join(' ')})`) +
        `, ${ROUNDS} rounds per batch size, inputs of ~${WORDS} words (interleaved), last-token pooling`,
    );
    for (const row of rows) console.log(row);
    console.log(`  lowest cosine between the two engines' vectors ${worst.toFixed(6)}`);
    console.log(`  load average before ${loadBefore}, after ${load()} (1, 5, 15 min)`);
  } finally {
    await Promise.all([t.stop(), l.stop()]);
  }
}

await main();
