// --kv-disk on a prefill worker: a tenant's prefix evicted from the prefill's pool comes back
// from disk on its next request through the router (cached_tokens shows it, the greedy output
// is the same), and never for another tenant. Restarted on the same directory, the prefill reports
// the tenant's pages it finds there to the router (/health `prefixCache`, keyed with the cluster
// secret), and reports none of them when restarted under another secret.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrefixHasher } from '../../../src/pages/index.js';
import { promptIds, scrape, waitUntil, writeJson } from '../support/process.js';
import {
  detail,
  SECRET,
  startRouter,
  startWorker,
  useTestHome,
  type Proc,
  type Router,
  type Worker,
} from './support.js';

const home = useTestHome();
const procs: Proc[] = [];
let prefill: Worker;
let router: Router;
let dir: string;
const POOL = ['--model', 'builtin:tiny', '--context-length', '256', '--kv-pages', '24'];
const PROMPT = promptIds(70, 5151);

beforeAll(async () => {
  const keys = await writeJson(home.dir, 'keys.json', { 'sk-alice': 'alice', 'sk-bob': 'bob' });
  dir = join(home.dir, 'kv-disk');
  await mkdir(dir);
  prefill = await startWorker('p', 'prefill', [...POOL, '--kv-disk', dir], home.dir);
  procs.push(prefill);
  const decode = await startWorker('d', 'decode', POOL, home.dir);
  procs.push(decode);
  router = await startRouter('r', [prefill], [decode], ['--model', 'builtin:tiny', '--api-keys', keys], home.dir);
  procs.push(router);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

async function complete(key: string, prompt: number[]): Promise<{ cached: number; text: string }> {
  const r = (await router
    .client(key)
    .completions.create({ model: 'builtin:tiny', prompt, max_tokens: 8, temperature: 0 })) as OpenAI.Completion;
  return { cached: r.usage?.prompt_tokens_details?.cached_tokens ?? Number.NaN, text: r.choices[0]?.text ?? '' };
}

describe('a prefill worker with --kv-disk', () => {
  it("loads a tenant's evicted prefix back from disk, and never for another tenant", async () => {
    const first = await complete('sk-alice', PROMPT);
    expect(first.cached).toBe(0);
    for (let i = 0; i < 3; i++) await complete('sk-bob', promptIds(200, 300 + i));
    await waitUntil('alice pages on disk', async () => {
      const m = await scrape(prefill.url);
      return (m.get('tessera_kv_disk_pages_spilled') ?? 0) >= 4 && m.get('tessera_kv_disk_pending_writes') === 0;
    });
    expect(await complete('sk-bob', PROMPT)).toMatchObject({ cached: 0 });
    expect(await complete('sk-alice', PROMPT)).toEqual({ cached: 64, text: first.text });
    expect((await scrape(prefill.url)).get('tessera_kv_disk_pages_loaded')).toBe(4);
  });

  it("restarted on the same directory, reports the tenant's pages it finds on disk; under another secret, none", async () => {
    await prefill.stop();
    const again = await startWorker('p-again', 'prefill', [...POOL, '--kv-disk', dir], home.dir);
    procs.push(again);
    const tenants = async (w: Worker): Promise<Record<string, string[]>> =>
      ((await detail(w))['prefixCache'] as { tenants: Record<string, string[]> }).tenants;
    const h = new PrefixHasher(SECRET);
    const alice = h.blockHashes(h.tenantTag('alice'), PROMPT, 16);
    expect(alice).toHaveLength(4);
    expect((await detail(again)).pages['cached']).toBe(0); // nothing in the pool yet: all from disk
    expect((await tenants(again))[h.tenantTag('alice')]).toEqual(expect.arrayContaining(alice));
    await again.stop();
    const foreign = await startWorker('p-foreign', 'prefill', [...POOL, '--kv-disk', dir], home.dir, {
      TESSERA_CLUSTER_SECRET: 'another-cluster-secret-0123456789abcdef',
    });
    procs.push(foreign);
    expect(await tenants(foreign)).toEqual({});
  });
});
