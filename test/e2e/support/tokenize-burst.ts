// A burst of long prompts sent to /tokenize at once (the official openai client's `post`), while a
// /health poller measures how long the server's main thread keeps it waiting. Shared by
// test/e2e/serve-tokenize.test.ts and `npm run bench:tokenize`.
import { spawn } from 'node:child_process';
import OpenAI from 'openai';

export interface LatencySummary {
  readonly count: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface BurstResult {
  /** /health latencies while the burst ran. */
  readonly health: LatencySummary;
  /** From the first request sent to the last answer. */
  readonly burstMs: number;
  /** Each prompt's token count, in order. */
  readonly counts: readonly number[];
}

const SYLLABLES = [
  'ka',
  'lo',
  'mi',
  'tr',
  'ew',
  'qu',
  'ax',
  'zé',
  'çã',
  'ñu',
  'ør',
  'ße',
  '日',
  '本',
  'テ',
  'キ',
  'ελ',
  'ру',
  '🙂',
  'th',
];

/**
 * The i-th prompt of about `numBytes` UTF-8 bytes: made-up words of Latin, Greek, Cyrillic, CJK
 * and emoji syllables (drawn from i), so that few repeat and the tokenizer's word cache rarely
 * helps (as with real text of a large vocabulary), plus a few special tokens.
 */
export function burstPrompt(i: number, numBytes: number): string {
  let text = `Prompt ${i}:`;
  let state = (i + 1) * 2654435761;
  const next = (): number => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state;
  };
  for (let k = 0; Buffer.byteLength(text) < numBytes; k++) {
    let word = '';
    for (let n = 2 + (next() % 4); n > 0; n--) word += SYLLABLES[next() % SYLLABLES.length];
    text += k % 97 === 96 ? ' <|im_end|>' : ` ${word}`;
  }
  return text;
}

export function summarize(latenciesMs: readonly number[]): LatencySummary {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  return { count: sorted.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: sorted[sorted.length - 1] ?? Number.NaN };
}

/**
 * The /health poller, in a process of its own (with its own connection), so that what it measures
 * is the server's delay, not the burst's answers being parsed beside it: one request at a time,
 * `gap` ms apart, until its stdin ends; then it prints the latencies (ms) as JSON.
 */
const POLLER = `
const http = require('node:http');
const [url, gap] = [process.argv[1], Number(process.argv[2])];
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const latencies = [];
let done = false;
process.stdin.on('data', () => {});
process.stdin.on('end', () => (done = true));
(async () => {
  process.stdout.write('polling\\n');
  while (!done) {
    const t0 = performance.now();
    await new Promise((resolve, reject) =>
      http.get(url + '/health', { agent }, (res) => { res.resume(); res.on('end', resolve); }).on('error', reject));
    latencies.push(performance.now() - t0);
    await new Promise((resolve) => setTimeout(resolve, gap));
  }
  process.stdout.write(JSON.stringify(latencies) + '\\n');
  agent.destroy();
})();
`;

async function startPoller(url: string, gapMs: number): Promise<{ stop(): Promise<number[]> }> {
  const child = spawn(process.execPath, ['-e', POLLER, url, String(gapMs)], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', () => out.includes('polling') && resolve());
    void exited.then(() => reject(new Error(`the /health poller exited early: ${out}`)));
  });
  let stopped: Promise<number[]> | undefined;
  const stop = async (): Promise<number[]> => {
    child.stdin.end();
    await exited;
    return JSON.parse(out.slice(out.indexOf('\n') + 1)) as number[];
  };
  return { stop: () => (stopped ??= stop()) };
}

/**
 * Sends `numPrompts` chat prompts of `promptBytes` each to /tokenize at once (templated and
 * tokenized by the server) while a poller process times /health, one request at a time.
 */
export async function tokenizeBurst(
  url: string,
  options: { readonly numPrompts: number; readonly promptBytes: number; readonly pollGapMs?: number },
): Promise<BurstResult> {
  // The client's requests leave together, once every one is built: the server meets the whole
  // burst at once, as it would from many clients, rather than as fast as one client builds them.
  let waiting = 0;
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const client = new OpenAI({
    baseURL: url,
    apiKey: 'none',
    maxRetries: 0,
    timeout: 120_000,
    fetch: async (input, init) => {
      if (++waiting === options.numPrompts) open();
      await gate;
      return fetch(input, init);
    },
  });
  const bodies = Array.from({ length: options.numPrompts }, (_, i) => ({
    messages: [{ role: 'user', content: burstPrompt(i, options.promptBytes) }],
  }));
  const poller = await startPoller(url, options.pollGapMs ?? 5);
  try {
    const started = performance.now();
    const answers = await Promise.all(
      bodies.map((body) => client.post<{ count: number; tokens: number[] }>('/tokenize', { body })),
    );
    const burstMs = performance.now() - started;
    return { health: summarize(await poller.stop()), burstMs, counts: answers.map((a) => a.count) };
  } finally {
    await poller.stop();
  }
}
