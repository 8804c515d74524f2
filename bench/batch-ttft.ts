// Batch API priority benchmark: does a running batch raise interactive time to first token? A
// real `tessera serve --batch-dir` on gen-model's m100 (q4_0 GGUF at /tmp/m100.gguf, generated
// once). Each round, in turn on one server (so the machine's load weighs on both sides alike):
// `alone`, --samples short streaming chat requests one after another (a 20 ms pause between
// them, the lull in which batch lines may start); then `with batch`, a batch of --lines chat
// lines (32 tokens each) is created, the same requests are sent while it runs, and the batch is
// cancelled (and waited for) before the next round. Prints TTFT p50/p99 both ways per round and
// over all rounds, their ratios, and the batch lines answered meanwhile. The target (issue 29):
// p99 with the batch at most 1.2x p99 alone. The load average is printed at the start and end.
// A benchmark, not a test: it asserts nothing.
//
//   node --import ./bench/lib/register-ts.mjs bench/batch-ttft.ts [--samples 40] [--rounds 3] [--lines 400]
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const SAMPLES = Number(flag('--samples') ?? 40);
const ROUNDS = Number(flag('--rounds') ?? 3);
const LINES = Number(flag('--lines') ?? 400);
const MODEL = '/tmp/m100.gguf';

function ensureModel(): void {
  if (existsSync(MODEL)) return;
  execFileSync(
    process.execPath,
    ['bin/tessera.js', 'gen-model', '--preset', 'm100', '--format', 'gguf', '--dtype', 'q4_0', '--out', MODEL],
    { stdio: 'inherit' },
  );
}

async function startServer(batchDir: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      'bin/tessera.js',
      'serve',
      '--model',
      MODEL,
      '--served-model-name',
      'm100',
      '--port',
      '0',
      '--batch-dir',
      batchDir,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the server exited with code ${code} before listening`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
      if (url !== undefined) resolve({ url, child });
    });
  });
}

async function ttftOf(client: OpenAI, i: number): Promise<number> {
  const start = performance.now();
  const stream = await client.chat.completions.create({
    model: 'm100',
    messages: [{ role: 'user', content: `Tell me about ship number ${i} in the harbour.` }],
    max_tokens: 8,
    stream: true,
  });
  let first: number | undefined;
  for await (const chunk of stream)
    if (first === undefined && (chunk.choices[0]?.delta.content ?? '') !== '') first = performance.now();
  return (first ?? performance.now()) - start;
}

async function samples(client: OpenAI, round: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    out.push(await ttftOf(client, round * 1000 + i));
    await new Promise((r) => setTimeout(r, 20));
  }
  return out;
}

const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};
const fmt = (xs: readonly number[]): string => `p50 ${pct(xs, 50).toFixed(1)} ms, p99 ${pct(xs, 99).toFixed(1)} ms`;

async function main(): Promise<void> {
  ensureModel();
  process.stdout.write(
    `load average at start: ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}\n`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'bench-batch-'));
  const { url, child } = await startServer(dir);
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0 });
  const lines = Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({
      custom_id: `l${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { messages: [{ role: 'user', content: `Write about the sea, part ${i}.` }], max_tokens: 32 },
    }),
  ).join('\n');
  const file = await client.files.create({ file: await toFile(Buffer.from(lines), 'lines.jsonl'), purpose: 'batch' });
  await samples(client, 99); // warm-up
  const alone: number[] = [];
  const withBatch: number[] = [];
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const a = await samples(client, r);
      const batch = await client.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      });
      await new Promise((res) => setTimeout(res, 200)); // the batch's first lines running
      const b = await samples(client, r + 500);
      const during = await client.batches.retrieve(batch.id);
      await client.batches.cancel(batch.id);
      for (;;) {
        const s = await client.batches.retrieve(batch.id);
        if (s.status === 'cancelled' || s.status === 'completed') break;
        await new Promise((res) => setTimeout(res, 50));
      }
      alone.push(...a);
      withBatch.push(...b);
      process.stdout.write(
        `round ${r + 1}: alone ${fmt(a)}; with batch ${fmt(b)} (${during.request_counts?.completed ?? 0} batch lines answered meanwhile); p99 ratio ${(pct(b, 99) / pct(a, 99)).toFixed(2)}x\n`,
      );
    }
    process.stdout.write(
      `all rounds (${alone.length} samples each): alone ${fmt(alone)}; with batch ${fmt(withBatch)}; ` +
        `p50 ratio ${(pct(withBatch, 50) / pct(alone, 50)).toFixed(2)}x, p99 ratio ${(pct(withBatch, 99) / pct(alone, 99)).toFixed(2)}x (target <= 1.20x)\n`,
    );
  } finally {
    child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    process.stdout.write(
      `load average at end: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}\n`,
    );
  }
}

await main();
