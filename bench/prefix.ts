// Multi-turn chat benchmark for prefix-aware routing (`npm run bench:prefix`): several tenants,
// each with its own shared system prompt, several conversations per tenant that grow turn by
// turn (the whole history is the next prompt, as a chat client sends it). The same workload
// runs, one cluster after the other, in this one run, on real processes (loopback):
//   single   1 prefill + 1 decode (the hit-rate reference: one cache sees every prompt)
//   load     2 prefills + 1 decode, router --routing load
//   prefix   2 prefills + 1 decode, router --routing prefix
// Per cluster: the prefix-cache hit rate (tokens the prefills found cached / tokens looked up,
// from their /health), TTFT p50/p99 (streamed, time to the first chunk), requests routed by
// prefix vs by load, and the peak prefill in-flight over the mean (sampled from the router's
// /health, and the router's own peak for prefix picks). A benchmark: it asserts nothing.
// --rounds N (default 2) runs load and prefix N times each, in the order load, prefix, prefix,
// load, ... (so neither always runs first on a machine whose load drifts): TTFTs are pooled per
// arm, and each round's ratio is printed too.
//
//   node --import ./bench/lib/register-ts.mjs bench/prefix.ts [--rounds 2] [--tenants 4] [--conversations 3]
//        [--turns 4] [--system 256] [--user 32] [--reply 16] [--model builtin:tiny] [--vocab 31000] [--context 2048]
//   e.g. the shipped demo model: --model builtin:austen --vocab 4000 --context 512 --system 160 --user 24
import {
  health,
  promptIds,
  startRouter,
  startWorker,
  testHome,
  type Proc,
  type Worker,
} from '../test/e2e/pd/support.js';
import { writeJson } from '../test/e2e/support/process.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const ROUNDS = flag('--rounds', 2);
const TENANTS = flag('--tenants', 4);
const CONVERSATIONS = flag('--conversations', 3);
const TURNS = flag('--turns', 4);
const SYSTEM = flag('--system', 256);
const USER = flag('--user', 32);
const REPLY = flag('--reply', 16);
const modelAt = args.indexOf('--model');
const MODEL = modelAt >= 0 ? (args[modelAt + 1] as string) : 'builtin:tiny';
const VOCAB = flag('--vocab', 31_000); // token ids are drawn from [3, 3 + VOCAB)
const CONTEXT = String(flag('--context', 2048));
const ids = (n: number, first: number): number[] => promptIds(n, first).map((x) => 3 + ((x - 3) % VOCAB));
const POOL = ['--model', MODEL, '--context-length', CONTEXT, '--kv-pages', '1024', '--max-running-requests', '16'];

interface Result {
  readonly name: string;
  readonly hitRate: number;
  readonly lookupTokens: number;
  readonly hitTokens: number;
  readonly perWorker: number[];
  readonly ttfts: number[];
  readonly loadReasons: Record<string, number>;
  /** The router's mean time per pick (ms). */
  readonly pickMs: number;
  readonly ttftP50: number;
  readonly ttftP99: number;
  readonly byPrefix: number;
  readonly byLoad: number;
  readonly peakOverMean: number;
  readonly routerPeak: number;
  readonly failed: number;
}

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};

async function prefixStats(w: Worker): Promise<{ lookupTokens: number; hitTokens: number }> {
  return (
    ((await health(w.url)).body['prefixCache'] as { lookupTokens: number; hitTokens: number }) ?? {
      lookupTokens: 0,
      hitTokens: 0,
    }
  );
}

async function runCluster(
  name: string,
  numPrefills: number,
  routing: 'prefix' | 'load',
  home: string,
  keys: string,
): Promise<Result> {
  const procs: Proc[] = [];
  try {
    const prefills = await Promise.all(
      Array.from({ length: numPrefills }, (_, i) => startWorker(`${name}-p${i}`, 'prefill', POOL, home)),
    );
    const decode = await startWorker(`${name}-d`, 'decode', POOL, home);
    procs.push(...prefills, decode);
    const router = await startRouter(
      `${name}-r`,
      prefills,
      [decode],
      ['--model', MODEL, '--context-length', CONTEXT, '--api-keys', keys, '--routing', routing],
      home,
    );
    procs.push(router);
    const ttfts: number[] = [];
    let failed = 0;
    let peakOverMean = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const ws = ((await health(router.url)).body['workers'] as { role: string; inFlight: number }[]).filter(
          (w) => w.role === 'prefill',
        );
        const total = ws.reduce((s, w) => s + w.inFlight, 0);
        if (total >= ws.length)
          peakOverMean = Math.max(peakOverMean, Math.max(...ws.map((w) => w.inFlight)) / (total / ws.length));
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    const conversation = async (tenant: number, c: number): Promise<void> => {
      const client = router.client(`sk-${tenant}`);
      let history = ids(SYSTEM, 10_000 + tenant * 997);
      for (let turn = 0; turn < TURNS; turn++) {
        history = [...history, ...ids(USER, 50_000 + tenant * 131 + c * 17 + turn * 7)];
        const started = performance.now();
        let first = Number.NaN;
        const reply: number[] = [];
        try {
          const body = {
            model: MODEL,
            prompt: history,
            max_tokens: REPLY,
            temperature: 0,
            ignore_eos: true,
            stream: true,
            return_token_ids: true,
          };
          for await (const chunk of (await client.completions.create(body as never)) as unknown as AsyncIterable<{
            choices: { token_ids?: number[] }[];
          }>) {
            if (Number.isNaN(first)) first = performance.now() - started;
            reply.push(...(chunk.choices[0]?.token_ids ?? []));
          }
          ttfts.push(first);
        } catch (e) {
          failed++;
          process.stderr.write(`${name}: tenant ${tenant} conversation ${c} turn ${turn}: ${String(e)}\n`);
        }
        history = [...history, ...(reply.length > 0 ? reply : ids(REPLY, 90_000 + turn))];
      }
    };
    await Promise.all(
      Array.from({ length: TENANTS * CONVERSATIONS }, (_, k) => conversation(k % TENANTS, Math.floor(k / TENANTS))),
    );
    sampling = false;
    await sampler;
    const stats = await Promise.all(prefills.map(prefixStats));
    const routingReport = (await health(router.url)).body['routing'] as {
      byPrefix: number;
      byLoad: number;
      peakPrefixLoadOverMean: number;
      loadReasons: Record<string, number>;
      picks?: number;
      pickMs?: number;
    };
    const sum = (k: 'lookupTokens' | 'hitTokens') => stats.reduce((s, x) => s + x[k], 0);
    return {
      name,
      hitRate: sum('hitTokens') / sum('lookupTokens'),
      lookupTokens: sum('lookupTokens'),
      hitTokens: sum('hitTokens'),
      ttfts,
      loadReasons: routingReport.loadReasons,
      pickMs: (routingReport.pickMs ?? Number.NaN) / (routingReport.picks ?? Number.NaN),
      perWorker: stats.map((s) => (s.lookupTokens === 0 ? 0 : s.hitTokens / s.lookupTokens)),
      ttftP50: quantile(ttfts, 0.5),
      ttftP99: quantile(ttfts, 0.99),
      byPrefix: routingReport.byPrefix,
      byLoad: routingReport.byLoad,
      peakOverMean,
      routerPeak: routingReport.peakPrefixLoadOverMean,
      failed,
    };
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
  }
}

async function main(): Promise<void> {
  const home = await testHome();
  try {
    const keys = await writeJson(
      home.dir,
      'keys.json',
      Object.fromEntries(Array.from({ length: TENANTS }, (_, t) => [`sk-${t}`, `tenant-${t}`])),
    );
    process.stdout.write(
      `bench:prefix  ${TENANTS} tenants x ${CONVERSATIONS} conversations x ${TURNS} turns; system ${SYSTEM}, user ${USER}, reply ${REPLY} tokens; ${MODEL}\n`,
    );
    const single = await runCluster('single', 1, 'load', home.dir, keys);
    const rounds: { load: Result; prefix: Result }[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? (['load', 'prefix'] as const) : (['prefix', 'load'] as const);
      const got: Partial<Record<'load' | 'prefix', Result>> = {};
      for (const routing of order) got[routing] = await runCluster(`${routing}${r + 1}`, 2, routing, home.dir, keys);
      rounds.push(got as { load: Result; prefix: Result });
    }
    const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
    process.stdout.write(
      'cluster   hit rate  per prefill       TTFT p50   TTFT p99   by prefix  by load (why)            peak/mean (sampled, prefix picks)  failed  pick\n',
    );
    for (const r of [single, ...rounds.flatMap((x) => [x.load, x.prefix])]) {
      const why = Object.entries(r.loadReasons)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
      process.stdout.write(
        `${r.name.padEnd(9)} ${pct(r.hitRate).padStart(8)}  ${r.perWorker.map(pct).join(' / ').padEnd(16)} ${r.ttftP50.toFixed(1).padStart(7)} ms ${r.ttftP99.toFixed(1).padStart(7)} ms ${String(r.byPrefix).padStart(10)} ${`${r.byLoad}${why === '' ? '' : ` (${why})`}`.padEnd(24)} ${r.peakOverMean.toFixed(2)}, ${r.routerPeak.toFixed(2)}  ${String(r.failed).padStart(33)}  ${(r.pickMs * 1000).toFixed(0)} us\n`,
      );
    }
    for (const [i, { load, prefix }] of rounds.entries())
      process.stdout.write(
        `round ${i + 1}: TTFT p50 prefix/load ${(prefix.ttftP50 / load.ttftP50).toFixed(3)}, p99 ${(prefix.ttftP99 / load.ttftP99).toFixed(3)}\n`,
      );
    const pooled = (arm: 'load' | 'prefix') => {
      const rs = rounds.map((x) => x[arm]);
      const ttfts = rs.flatMap((x) => x.ttfts);
      const hit = rs.reduce((s, x) => s + x.hitTokens, 0) / rs.reduce((s, x) => s + x.lookupTokens, 0);
      return {
        p50: quantile(ttfts, 0.5),
        p99: quantile(ttfts, 0.99),
        hit,
        peak: Math.max(...rs.map((x) => x.routerPeak)),
      };
    };
    const load = pooled('load');
    const prefix = pooled('prefix');
    process.stdout.write(
      `prefix vs load over ${ROUNDS} rounds: hit rate ${pct(prefix.hit)} vs ${pct(load.hit)} (single worker ${pct(single.hitRate)}; prefix/single ${(prefix.hit / single.hitRate).toFixed(3)}); ` +
        `TTFT p50 ratio prefix/load ${(prefix.p50 / load.p50).toFixed(3)}, p99 ${(prefix.p99 / load.p99).toFixed(3)}; ` +
        `peak prefix-pick load/mean ${prefix.peak.toFixed(2)} (bound ${1.5})\n`,
    );
  } finally {
    await home.remove();
  }
}

await main();
