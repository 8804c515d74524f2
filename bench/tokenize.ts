// `npm run bench:tokenize`: does tokenization stall the event loop?
//   1. Two `tessera serve` processes on builtin:tiny, one with the tokenizer threads (the default) and
//      one with the test-only fault `inline-tokenize` (every prompt on the main thread). Each gets the
//      same bursts of BURST_PROMPTS chat prompts of BURST_BYTES to /tokenize at once, in alternating
//      rounds (so both meet the same contention), while a /health poller measures the main thread:
//      p50 / p99 / max /health latency and the burst's total time, with the ratios inline / threads.
//      TARGET=up: the same against the router of `tessera up` (inline-tokenize armed in the whole cluster).
//   2. In process: one prompt's latency inline vs through a tokenizer thread, by size (why text under
//      INLINE_BELOW_CHARS stays inline).
// Figures on a shared machine are under contention: read the ratios, measured side by side.
import { INLINE_BELOW_CHARS } from '../src/api/index.js';
import { loadModelInfo } from '../src/model/index.js';
import { promptRecipeOf, startTokenizerPool } from '../src/tokenizer/index.js';
import { spawnTessera } from '../test/e2e/pd/support.js';
import { startServer, testHome } from '../test/e2e/support/process.js';
import { burstPrompt, tokenizeBurst, type BurstResult } from '../test/e2e/support/tokenize-burst.js';

const BURST_PROMPTS = Number(process.env['BURST_PROMPTS'] ?? 128);
const BURST_BYTES = Number(process.env['BURST_BYTES'] ?? 6144);
const ROUNDS = Number(process.env['ROUNDS'] ?? 3);
const TARGET = process.env['TARGET'] === 'up' ? 'up' : 'serve';

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const f = (ms: number): string => `${ms.toFixed(1)} ms`.padStart(11);

interface Target {
  readonly url: string;
  stop(): Promise<unknown>;
}

const INLINE_ENV = { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'inline-tokenize' };

/** `tessera serve`, or (TARGET=up) the router of `tessera up`. */
async function startTarget(home: string, env: Record<string, string>): Promise<Target> {
  if (TARGET === 'serve') return startServer(['--context-length', '4096'], home, env);
  const up = spawnTessera('up', ['up', '--port', '0', '--context-length', '4096', '--kv-pages', '256'], home, env);
  const url = (await up.waitFor(/listening on (http:\/\/[\d.]+:\d+)/))[1] as string;
  return { url, stop: () => up.stop() };
}

async function serverBursts(home: string): Promise<void> {
  const servers: Record<'threads' | 'inline', Target> = {
    threads: await startTarget(home, {}),
    inline: await startTarget(home, INLINE_ENV),
  };
  try {
    const results: Record<'threads' | 'inline', BurstResult[]> = { threads: [], inline: [] };
    for (const mode of ['threads', 'inline'] as const)
      await tokenizeBurst(servers[mode].url, { numPrompts: 16, promptBytes: BURST_BYTES }); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const mode of ['threads', 'inline'] as const) {
        const r = await tokenizeBurst(servers[mode].url, { numPrompts: BURST_PROMPTS, promptBytes: BURST_BYTES });
        results[mode].push(r);
        console.log(
          `round ${round + 1} ${mode.padEnd(7)} /health p50 ${f(r.health.p50Ms)} p99 ${f(r.health.p99Ms)} max ${f(r.health.maxMs)} (${r.health.count} polls); burst ${f(r.burstMs)}`,
        );
      }
    }
    const pick = (mode: 'threads' | 'inline', get: (r: BurstResult) => number): number =>
      median(results[mode].map(get));
    console.log(
      `\n${BURST_PROMPTS} x ${BURST_BYTES} B chat prompts to /tokenize of ${TARGET}, median of ${ROUNDS} rounds:`,
    );
    console.log('                    threads      inline   inline/threads');
    const row = (name: string, get: (r: BurstResult) => number): void => {
      const t = pick('threads', get);
      const i = pick('inline', get);
      console.log(`${name.padEnd(14)} ${f(t)} ${f(i)}   ${(i / t).toFixed(2)}x`);
    };
    row('/health p50', (r) => r.health.p50Ms);
    row('/health p99', (r) => r.health.p99Ms);
    row('/health max', (r) => r.health.maxMs);
    row('burst total', (r) => r.burstMs);
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
  }
}

async function oneByOne(home: string): Promise<void> {
  const model = await loadModelInfo('builtin:tiny', { cacheDir: home });
  const pool = await startTokenizerPool(promptRecipeOf(model.tokenizer, model.chatTemplate), { numThreads: 2 });
  try {
    console.log(`\none prompt at a time, median of 50 (INLINE_BELOW_CHARS = ${INLINE_BELOW_CHARS}):`);
    console.log('  chars      inline      thread   thread/inline');
    for (const numBytes of [64, 256, 512, 1024, 2048, 6144]) {
      const inline: number[] = [];
      const thread: number[] = [];
      for (let k = 0; k < 50; k++) {
        // A new text each time: the tokenizer caches the words it has seen.
        const text = burstPrompt(k * 10_000 + numBytes, numBytes);
        let t0 = performance.now();
        model.tokenizer.encode(text);
        inline.push(performance.now() - t0);
        t0 = performance.now();
        await pool.tokenize({ kind: 'text', text, addSpecialTokens: true, cacheScope: 'bench' });
        thread.push(performance.now() - t0);
      }
      const i = median(inline);
      const t = median(thread);
      console.log(`${String(burstPrompt(0, numBytes).length).padStart(7)} ${f(i)} ${f(t)}   ${(t / i).toFixed(2)}x`);
    }
  } finally {
    await pool.close();
  }
}

const home = await testHome();
try {
  console.log('(figures under contention from whatever else runs on this machine: compare the ratios)\n');
  await serverBursts(home.dir);
  await oneByOne(home.dir);
} finally {
  await home.remove();
}
