// The cluster-wide prefix store across real processes: two prefills, two decodes, a router with
// two tenants' keys. Tenant a's long prefix is computed on one prefill (X); while X is held over
// the router's load bound (a stream of a's, frozen in its decode; HOLD_ENV), a's same prompt goes by load to
// the other prefill (Y) with the hint that X holds the prefix: Y fetches those pages from X over
// the cluster channel (Y's tessera_kv_peer_pages_fetched, X's pages_served) and computes only
// the tail (cached_tokens), with the same greedy output. Tenant b's same prompt is never hinted
// and fetches nothing (and gets the same output, computed from scratch).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { promptIds, scrape, waitUntil, writeJson } from '../support/process.js';
import {
  detail,
  health,
  startRouter,
  startWorker,
  useTestHome,
  type Proc,
  type Router,
  type Worker,
} from './support.js';

/**
 * The lever that holds X over the load bound: the router keeps the attempt of a frozen decode in
 * flight (ignore-host-loss: it does not close a host its polls mark down; a long tokenMs). Test
 * setup only; neither touches the prefix store.
 */
const HOLD_ENV = {
  TESSERA_ALLOW_FAULTS: '1',
  TESSERA_FAULT: 'ignore-host-loss',
  TESSERA_PD_TIMEOUTS: 'tokenMs=300000',
};

const home = useTestHome();
const procs: Proc[] = [];
let prefills: Worker[];
let decodes: Worker[];
let router: Router;
const POOL = ['--model', 'builtin:tiny', '--context-length', '1024', '--kv-pages', '128'];
const PROMPT = promptIds(161, 4242); // 160 tokens looked up: 10 full pages of 16

beforeAll(async () => {
  const keys = await writeJson(home.dir, 'keys.json', { 'sk-a': 'a', 'sk-b': 'b' });
  const workers = await Promise.all([
    startWorker('p1', 'prefill', POOL, home.dir),
    startWorker('p2', 'prefill', POOL, home.dir),
    startWorker('d1', 'decode', POOL, home.dir),
    startWorker('d2', 'decode', POOL, home.dir),
  ]);
  procs.push(...workers);
  prefills = workers.slice(0, 2);
  decodes = workers.slice(2);
  router = await startRouter(
    'r',
    prefills,
    decodes,
    ['--model', 'builtin:tiny', '--api-keys', keys],
    home.dir,
    HOLD_ENV,
  );
  procs.push(router);
}, 120_000);
afterAll(async () => {
  for (const d of decodes ?? []) d.signal('SIGCONT');
  await Promise.all(procs.map((p) => p.stop()));
});

interface Reply {
  readonly ids: number[];
  readonly cached: number;
}

async function complete(key: string, prompt: readonly number[], maxTokens = 6): Promise<Reply> {
  const body = {
    model: 'builtin:tiny',
    prompt: [...prompt],
    max_tokens: maxTokens,
    temperature: 0,
    ignore_eos: true,
    return_token_ids: true,
  };
  const r = (await router.client(key).completions.create(body as never)) as unknown as {
    choices: { token_ids: number[] }[];
    usage?: { prompt_tokens_details?: { cached_tokens?: number } };
  };
  return { ids: r.choices[0]?.token_ids ?? [], cached: r.usage?.prompt_tokens_details?.cached_tokens ?? Number.NaN };
}

const lookups = async (w: Worker): Promise<number> =>
  ((await detail(w))['prefixCache'] as { lookupTokens: number }).lookupTokens;
const metric = async (w: Worker, name: string): Promise<number> => (await scrape(w.url)).get(name) ?? Number.NaN;
const inFlight = async (w: Worker): Promise<number> => {
  const workers = (await health(router.url)).body['workers'] as { url: string; inFlight: number }[];
  return workers.find((x) => x.url === w.url)?.inFlight ?? Number.NaN;
};
const hinted = async (): Promise<number> => ((await health(router.url)).body['routing'] as { hinted: number }).hinted;
/** The router has polled every prefill's report since its last lookup. */
const reported = () =>
  waitUntil("the prefills' reports to reach the router", async () => {
    const ws = ((await health(router.url)).body['routing'] as { workers: { url: string; lookupTokens: number }[] })
      .workers;
    const mine = await Promise.all(prefills.map(lookups));
    return prefills.every((p, i) => ws.find((y) => y.url === p.url)?.lookupTokens === mine[i]);
  });

describe('the cluster-wide prefix store', () => {
  it("serves a tenant's prefix computed on one prefill to the other by fetch, never to another tenant", async () => {
    const first = await complete('sk-a', PROMPT);
    expect(first.cached).toBe(0);
    const lookedUp = await Promise.all(prefills.map(lookups));
    const x = prefills[lookedUp.findIndex((n) => n > 0)] as Worker;
    const y = prefills.find((p) => p !== x) as Worker;
    await reported();

    // Hold X over the load bound: a's stream (routed to X by prefix), frozen in its decode once decoding.
    const hold = new AbortController();
    const stream = (await router.client('sk-a').completions.create(
      {
        model: 'builtin:tiny',
        prompt: [...PROMPT, 9, 9, 9],
        max_tokens: 800,
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
    await waitUntil('the held stream on X', async () => (await inFlight(x)) === 1);
    const frozen = (await Promise.all(decodes.map(inFlight))).findIndex((n) => n === 1);
    decodes[frozen]?.signal('SIGSTOP');

    const served = await metric(x, 'tessera_kv_peer_pages_served');
    const hintedBefore = await hinted();
    const fetched = await complete('sk-a', PROMPT);
    expect((await hinted()) - hintedBefore).toBe(1); // sent by load to Y, naming X as the holder
    expect(await inFlight(x)).toBe(1); // the hold lasted: this request went by load, to Y
    expect(fetched.ids).toEqual(first.ids);
    expect(await metric(y, 'tessera_kv_peer_pages_fetched')).toBe(10);
    expect(await metric(y, 'tessera_kv_peer_pages_installed')).toBe(10);
    expect((await metric(x, 'tessera_kv_peer_pages_served')) - served).toBe(10);
    expect(fetched.cached).toBe(160); // Y computed only the last token

    const other = await complete('sk-b', PROMPT);
    expect(await hinted()).toBe(hintedBefore + 1); // tenant b has no holder: never hinted
    expect(other.ids).toEqual(first.ids);
    expect(other.cached).toBe(0);
    expect(await metric(y, 'tessera_kv_peer_pages_fetched')).toBe(10);
    expect(await metric(x, 'tessera_kv_peer_pages_fetched')).toBe(0);
    expect((await metric(x, 'tessera_kv_peer_pages_served')) - served).toBe(10);

    decodes[frozen]?.signal('SIGCONT');
    hold.abort();
    await reading;
  }, 60_000);
});
