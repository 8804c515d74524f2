// Issue 17 against a real `tessera up` (router, prefill, decode), driven by the openai client:
//   - requests past a wire limit (top_k >= 2^31, a stop string over 1024 characters, 1025
//     stop_token_ids) get a 400 naming the field while 30 others run beside them, and decode
//     never sees a malformed frame (before: decode closed the router's connection, failing all);
//   - n = 64 works on an idle cluster (before: 503 "overloaded" for any n past 32, forever);
//   - 24 concurrent prompts of 250 tokens all succeed (before: 17 got 503 "no room for 16 KV
//     pages now"): the router queues them, the wait shows in /health and /metrics;
//   - with --api-keys, /health tells a stranger (or a tenant) only up or down; the admin key
//     sees the workers; afterwards every page is free or cached.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY } from '../support/process.js';
import { allIdle, detail, promptIds, scrape, spawnTessera, testHome, type Proc } from './support.js';

let home: Awaited<ReturnType<typeof testHome>>;
let cluster: Proc;
let routerUrl: string;
let workers: { name: string; url: string }[];
const KEY = 'sk-robust-tenant-a';

beforeAll(async () => {
  home = await testHome();
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
  await home?.remove();
});

const client = () => new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120_000 });

describe('tessera up under hostile and heavy load', () => {
  it('refuses requests past a wire limit alone, with a 400 naming the field; the others all finish', async () => {
    const c = client();
    const good = Array.from({ length: 30 }, (_, i) =>
      c.completions.create({ model: 'builtin:tiny', prompt: promptIds(20, 100 + i), max_tokens: 8, temperature: 0 }),
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
    expect(await Promise.all(bad)).toEqual(['top_k', 'stop', 'stop_token_ids']);
    const done = await Promise.all(good);
    expect(done.every((r) => r.choices[0]?.finish_reason === 'length')).toBe(true);
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
    const c = client();
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
    const seconds = (Date.now() - started) / 1000;
    expect(results.filter((r) => r !== 'ok')).toEqual([]);
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
