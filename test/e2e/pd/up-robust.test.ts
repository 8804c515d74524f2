// Issue 17 against a real `tessera up` (router, prefill, decode), driven by the openai client:
//   - requests past a wire limit (top_k >= 2^31, a stop string over 1024 characters, 1025
//     stop_token_ids) get a 400 naming the field while 30 others run beside them, and decode
//     never sees a malformed frame (before: decode closed the router's connection, failing all);
//   - n = 64 works on an idle cluster (before: 503 "overloaded" for any n past 32, forever);
//   - 24 concurrent prompts of 250 tokens all succeed (before: 17 got 503 "no room for 16 KV
//     pages now"): the router queues them, the wait shows in /health and /metrics;
//   - with --api-keys, /health tells a stranger (or a tenant) only up or down; the admin key
//     sees the workers; afterwards every page is free or cached.
// Negative control at the end: a second cluster with skip-request-limits, close-on-bad-reserve
// and no-pd-wait-queue (through TESSERA_FAULT) fails the wire-limit round and the burst.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY } from '../support/process.js';
import { allIdle, detail, promptIds, scrape, spawnTessera, useTestHome, type Proc } from './support.js';

const home = useTestHome();
let cluster: Proc;
let routerUrl: string;
let workers: { name: string; url: string }[];
const KEY = 'sk-robust-tenant-a';

beforeAll(async () => {
  const keys = join(home.dir, 'keys.json');
  await writeFile(keys, JSON.stringify({ [KEY]: 'alice' }));
  cluster = spawnTessera(
    'up',
    ['up', '--port', '0', '--context-length', '512', '--decode-kv-pages', '96', '--api-keys', keys],
    home.dir,
  );
  routerUrl = (await cluster.waitFor(/router +http: (http:\/\/[\d.]+:\d+)/))[1] as string;
  await cluster.waitFor(/listening on/);
  workers = ['prefill-1', 'decode-1'].map((name) => ({
    name,
    url: new RegExp(`${name} +http: (http://[\\d.]+:\\d+)`).exec(cluster.stdout())?.[1] as string,
  }));
});
afterAll(async () => {
  await cluster?.stop();
});

const client = (url = routerUrl) => new OpenAI({ baseURL: `${url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120_000 });

/** 30 good requests with three past a wire limit among them: how the bad ones were answered, how many good ones finished. */
async function wireLimitRound(url: string): Promise<{ bad: unknown[]; goodFinished: number }> {
  const c = client(url);
  const good = Array.from({ length: 30 }, (_, i) =>
    c.completions.create({ model: 'builtin:tiny', prompt: promptIds(20, 100 + i), max_tokens: 8, temperature: 0 }).then(
      (r) => r.choices[0]?.finish_reason === 'length',
      () => false,
    ),
  );
  const bad = (
    [
      [{ top_k: 2 ** 31 }, 'top_k'],
      [{ stop: ['y'.repeat(1025)] }, 'stop'],
      [{ stop_token_ids: new Array(1025).fill(2) }, 'stop_token_ids'],
    ] as const
  ).map(([extra, param]) =>
    c.completions.create({ model: 'builtin:tiny', prompt: 'hello', max_tokens: 4, ...extra } as never).then(
      () => `accepted past the ${param} limit`,
      (e: unknown) => (e instanceof OpenAI.BadRequestError ? e.param : String(e)),
    ),
  );
  return { bad: await Promise.all(bad), goodFinished: (await Promise.all(good)).filter(Boolean).length };
}

/** 24 concurrent prompts of 250 tokens: the answers that were not 200s, and how long it took. */
async function burst(url: string): Promise<{ failures: string[]; seconds: number }> {
  const c = client(url);
  const started = Date.now();
  const results = await Promise.all(
    Array.from({ length: 24 }, (_, i) =>
      c.completions
        .create({
          model: 'builtin:tiny',
          prompt: promptIds(250, 3000 + i * 11),
          max_tokens: 16,
          ignore_eos: true,
        } as never)
        .then(
          () => 'ok',
          (e: unknown) => String(e),
        ),
    ),
  );
  return { failures: results.filter((r) => r !== 'ok'), seconds: (Date.now() - started) / 1000 };
}

describe('tessera up under hostile and heavy load', () => {
  it('refuses requests past a wire limit alone, with a 400 naming the field; the others all finish', async () => {
    expect(await wireLimitRound(routerUrl)).toEqual({ bad: ['top_k', 'stop', 'stop_token_ids'], goodFinished: 30 });
    const decode = await detail(workers[1] as { url: string });
    expect(decode.transport).toMatchObject({ malformed: 0 });
  });

  it('serves n = 64 choices on an idle cluster', async () => {
    const r = await client().completions.create({
      model: 'builtin:tiny',
      prompt: promptIds(10, 7),
      max_tokens: 4,
      n: 64,
    });
    expect(r.choices).toHaveLength(64);
    expect(new Set(r.choices.map((ch) => ch.index)).size).toBe(64);
  });

  it('queues a burst of 24 prompts of 250 tokens instead of refusing them', async () => {
    const { failures, seconds } = await burst(routerUrl);
    expect(failures).toEqual([]);
    const queue = ((await detail({ url: routerUrl })) as Record<string, unknown>)['queue'] as Record<string, number>;
    process.stdout.write(
      `PD burst: 24 x 250-token prompts in ${seconds.toFixed(1)} s, ${queue['waited']} waited, ${queue['timedOut']} timed out\n`,
    );
    expect(queue).toMatchObject({ waiting: 0, timedOut: 0 });
    expect((await scrape(routerUrl)).get('tessera_router_queue_wait_seconds_count')).toBeGreaterThanOrEqual(
      queue['waited'] ?? 0,
    );
  });

  it('tells strangers and tenants only whether it is up; the admin key sees the workers', async () => {
    const as = async (key: string | undefined) =>
      (await (
        await fetch(`${routerUrl}/health`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } })
      ).json()) as Record<string, unknown>;
    expect(await as(undefined)).toEqual({ status: 'ok' });
    expect(await as(KEY)).toEqual({ status: 'ok' });
    expect((await as(ADMIN_KEY))['workers']).toHaveLength(2);
    await allIdle(workers);
  });
});

describe('negative control: `up` with skip-request-limits, close-on-bad-reserve and no-pd-wait-queue', () => {
  let faulty: Proc;
  let faultyUrl: string;
  let faultyDecode: string;
  beforeAll(async () => {
    const keys = join(home.dir, 'keys.json');
    faulty = spawnTessera(
      'up-faulty',
      ['up', '--port', '0', '--context-length', '512', '--decode-kv-pages', '96', '--api-keys', keys],
      home.dir,
      { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'skip-request-limits,close-on-bad-reserve,no-pd-wait-queue' },
    );
    faultyUrl = (await faulty.waitFor(/router +http: (http:\/\/[\d.]+:\d+)/))[1] as string;
    await faulty.waitFor(/listening on/);
    faultyDecode = /decode-1 +http: (http:\/\/[\d.]+:\d+)/.exec(faulty.stdout())?.[1] as string;
  });
  afterAll(async () => {
    await faulty?.stop();
  });

  it('the requests past a wire limit reach decode, which closes the connection the others share', async () => {
    const { bad, goodFinished } = await wireLimitRound(faultyUrl);
    process.stdout.write(
      `negative control: ${goodFinished} of 30 good requests finished; bad ones: ${JSON.stringify(bad)}\n`,
    );
    expect(bad).not.toContain('top_k');
    expect(goodFinished).toBeLessThan(30); // the close failed requests that broke no rule
    const decode = await detail({ url: faultyDecode });
    expect(decode.transport['malformed']).toBeGreaterThan(0);
  });

  it('the burst gets 503s instead of waiting for room', async () => {
    const { failures } = await burst(faultyUrl);
    process.stdout.write(`negative control: ${failures.length} of 24 burst prompts refused\n`);
    expect(failures.length).toBeGreaterThan(0);
    expect(failures.every((f) => /503/.test(f))).toBe(true);
  });
});
