// Cluster-wide prefix store benchmark (`npm run bench:peer-prefix`): two prefills and two decodes
// behind the router, on m100, in one run. Per trial, tenant a's fresh 2k-token prefix is computed
// on one prefill (X); X is then held over the router's load bound (a stream of a's, frozen in its
// decode once decoding; the router runs with ignore-host-loss so that attempt stays in flight), so
// the same prompt goes by load to the other prefill (Y) with the hint that X holds it:
//   fetch      tenant a's prompt on Y: its 2k prefix fetched from X (the lease protocol), the tail computed
//   recompute  tenant b's same prompt on Y: nothing to fetch (another namespace), the whole 2k computed
// Both arms are timed the same way (TTFT through the router, max_tokens 1: prefill + the KV transfer
// to decode + the first token), on the same prefill, alternating which goes first. Prints each
// trial, the p50 of each arm and the ratio recompute/fetch (the target: >= 3). A benchmark:
// it asserts nothing, except that the fetch arm did fetch (else its figures would be recompute's).
//
//   node --import ./bench/lib/register-ts.mjs bench/peer-prefix.ts [--model /tmp/m100.gguf] [--trials 5] [--prefix 2048]
// Make the model once: node bin/tessera.js gen-model --preset m100 --format gguf --dtype q4_0 --out /tmp/m100.gguf
import { existsSync } from 'node:fs';
import OpenAI from 'openai';
import { promptIds, scrape, waitUntil, writeJson } from '../test/e2e/support/process.js';
import {
  detail,
  health,
  startRouter,
  startWorker,
  testHome,
  type Proc,
  type Router,
  type Worker,
} from '../test/e2e/pd/support.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? (args[i + 1] as string) : fallback;
};
const MODEL = flag('--model', '/tmp/m100.gguf');
const TRIALS = Number(flag('--trials', '5'));
const PREFIX = Number(flag('--prefix', '2048'));
const PAGE = 16;
const CONTEXT = 4096;
const POOL = ['--model', MODEL, '--context-length', String(CONTEXT), '--kv-pages', String((3 * CONTEXT) / PAGE)];

if (!existsSync(MODEL)) {
  process.stderr.write(`bench:peer-prefix: no model at ${MODEL}; make it with\n`);
  process.stderr.write(`  node bin/tessera.js gen-model --preset m100 --format gguf --dtype q4_0 --out ${MODEL}\n`);
  process.exit(2);
}

const p50 = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] as number;
const fmt = (ms: number): string => `${ms.toFixed(0)} ms`;

/** A client without the tests' 2-minute timeout: a 2k prefill on a shared, loaded CPU may take longer. */
const clientOf = (router: Router, key: string): OpenAI =>
  new OpenAI({ baseURL: `${router.url}/v1`, apiKey: key, maxRetries: 0, timeout: 1_800_000 });

async function ttftMs(router: Router, key: string, prompt: readonly number[]): Promise<number> {
  const start = performance.now();
  await clientOf(router, key).completions.create({
    model: 'm100',
    prompt: [...prompt],
    max_tokens: 1,
    temperature: 0,
    ignore_eos: true,
  } as never);
  return performance.now() - start;
}

async function main(): Promise<void> {
  const home = await testHome();
  const procs: Proc[] = [];
  try {
    const keys = await writeJson(home.dir, 'keys.json', { 'sk-a': 'a', 'sk-b': 'b', 'sk-w': 'w' });
    const workers = await Promise.all([
      startWorker('p1', 'prefill', POOL, home.dir),
      startWorker('p2', 'prefill', POOL, home.dir),
      startWorker('d1', 'decode', POOL, home.dir),
      startWorker('d2', 'decode', POOL, home.dir),
    ]);
    procs.push(...workers);
    const prefills = workers.slice(0, 2);
    const decodes = workers.slice(2);
    const router = await startRouter(
      'r',
      prefills,
      decodes,
      ['--model', MODEL, '--served-model-name', 'm100', '--api-keys', keys],
      home.dir,
      // Holds X over the load bound: a frozen decode's attempt stays in flight (test-only lever, not the prefix store).
      { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'ignore-host-loss', TESSERA_PD_TIMEOUTS: 'tokenMs=1800000' },
    );
    procs.push(router);
    const metric = async (w: Worker, name: string): Promise<number> => (await scrape(w.url)).get(name) ?? 0;
    const lookups = async (w: Worker): Promise<number> =>
      ((await detail(w))['prefixCache'] as { lookupTokens: number }).lookupTokens;
    const inFlight = async (w: Worker): Promise<number> => {
      const ws = (await health(router.url)).body['workers'] as { url: string; inFlight: number }[];
      return ws.find((x) => x.url === w.url)?.inFlight ?? Number.NaN;
    };
    const reported = () =>
      waitUntil(
        "the prefills' reports to reach the router",
        async () => {
          const ws = (
            (await health(router.url)).body['routing'] as { workers: { url: string; lookupTokens: number }[] }
          ).workers;
          const mine = await Promise.all(prefills.map(lookups));
          return prefills.every((p, i) => ws.find((y) => y.url === p.url)?.lookupTokens === mine[i]);
        },
        60_000,
      );

    // Warm-up: one request on each prefill (first-step costs, connections).
    await Promise.all([0, 1].map((i) => ttftMs(router, 'sk-w', promptIds(65, 90_000 + i))));
    const fetchMs: number[] = [];
    const recomputeMs: number[] = [];
    for (let trial = 0; trial < TRIALS; trial++) {
      const prompt = promptIds(PREFIX + 1, 1000 + trial * 7);
      const before = await Promise.all(prefills.map(lookups));
      const firstMs = await ttftMs(router, 'sk-a', prompt);
      const after = await Promise.all(prefills.map(lookups));
      const x = prefills[after.findIndex((n, i) => n > (before[i] as number))] as Worker;
      const y = prefills.find((p) => p !== x) as Worker;
      await reported();
      // Hold X over the load bound: a's stream, routed to X by prefix, frozen in its decode.
      const hold = new AbortController();
      const stream = (await clientOf(router, 'sk-a').completions.create(
        {
          model: 'm100',
          prompt: [...prompt, 7, 7],
          max_tokens: 1000,
          temperature: 0,
          stream: true,
          ignore_eos: true,
        } as never,
        { signal: hold.signal },
      )) as unknown as AsyncIterable<unknown>;
      let tokenOut: () => void = () => undefined;
      const decoding = new Promise<void>((resolve) => (tokenOut = resolve));
      const reading = (async () => {
        try {
          for await (const _ of stream) tokenOut();
        } catch {
          // aborted at the end
        } finally {
          tokenOut();
        }
      })();
      await decoding; // its KV is on its decode (acked): freezing the decode now holds the attempt, nothing else
      await waitUntil('the held stream on X', async () => (await inFlight(x)) === 1, 60_000);
      const frozen = decodes[(await Promise.all(decodes.map(inFlight))).findIndex((n) => n === 1)] as Worker;
      frozen.signal('SIGSTOP');
      const fetchedBefore = await metric(y, 'tessera_kv_peer_pages_fetched');
      const arms: [string, () => Promise<number>][] = [
        ['fetch', () => ttftMs(router, 'sk-a', prompt)],
        ['recompute', () => ttftMs(router, 'sk-b', prompt)],
      ];
      if (trial % 2 === 1) arms.reverse();
      const got: Record<string, number> = {};
      for (const [name, run] of arms) got[name] = await run();
      const fetched = (await metric(y, 'tessera_kv_peer_pages_fetched')) - fetchedBefore;
      frozen.signal('SIGCONT');
      hold.abort();
      await reading;
      await waitUntil('X idle again', async () => (await inFlight(x)) === 0, 60_000);
      if (fetched !== PREFIX / PAGE)
        throw new Error(
          `trial ${trial}: Y fetched ${fetched} pages, not ${PREFIX / PAGE}: the fetch arm did not fetch`,
        );
      fetchMs.push(got['fetch'] as number);
      recomputeMs.push(got['recompute'] as number);
      process.stdout.write(
        `trial ${trial}: compute on X ${fmt(firstMs)}; on Y: fetch ${fmt(got['fetch'] as number)} (${fetched} pages), ` +
          `recompute ${fmt(got['recompute'] as number)}\n`,
      );
    }
    const f = p50(fetchMs);
    const r = p50(recomputeMs);
    process.stdout.write(
      `\n${PREFIX}-token prefix on m100, ${TRIALS} trials, TTFT through the router (max_tokens 1):\n` +
        `  fetch from the other prefill  p50 ${fmt(f)}\n` +
        `  recompute on that prefill     p50 ${fmt(r)}\n` +
        `  recompute / fetch = ${(r / f).toFixed(2)}x (target >= 3x)\n`,
    );
  } finally {
    for (const p of procs) p.signal('SIGCONT');
    await Promise.all(procs.map((p) => p.stop()));
    await home.remove();
  }
}

await main();
