// Prefix-aware routing over two prefill hosts and one decode host (namespaces), driven by two
// tenants' API keys. The router routes on what the prefills report of their caches (/health
// `prefixCache`: per tenant, chained block hashes), never on a guess:
//   - tenant a's repeated prompt goes to the prefill that cached it (routed by prefix; that
//     worker's hit tokens grow) — and keeps doing so with the conversation growing
//   - the tenant property: tenant b's identical prompt is never routed by a's prefix (the router
//     counts it as "no-match"; neither prefill finds a cached token for it)
//   - negative control: a router with share-prefix-index-across-tenants routes tenant c's identical
//     prompt by the others' prefix
//   - the load-only router (--routing load) over the same workers never routes by prefix
//   - a prefill's /health (which the router reads, unauthenticated) names no tenant, and its
//     hashes are keyed with the cluster secret: a guessed prompt cannot be confirmed without it
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrefixHasher } from '../../../src/pages/index.js';
import { writeJson } from '../support/process.js';
import { detail, greedyIds, health, promptIds, scrape, useTestHome, waitUntil } from '../pd/support.js';
import {
  createLan,
  namespacesOrWarn,
  startRouterOn,
  startWorkerOn,
  type HostRouter,
  type HostWorker,
  type Lan,
} from './support.js';

const unavailable = namespacesOrWarn('test/e2e/cluster/prefix-routing.test.ts');

const ARGS = ['--context-length', '1024', '--kv-pages', '256'];
const KEYS = { 'sk-a': 'a', 'sk-b': 'b', 'sk-c': 'c' };

const home = useTestHome();
let lan: Lan | undefined;
const procs: { stop(): Promise<unknown> }[] = [];
let p1: HostWorker, p2: HostWorker, d1: HostWorker;
let router: HostRouter, loadOnly: HostRouter, leaky: HostRouter;

beforeAll(async () => {
  if (unavailable !== undefined) return;
  const l = createLan();
  lan = l;
  [p1, p2, d1] = await Promise.all([
    startWorkerOn(l.host('p1'), 'prefill', ARGS, home.dir),
    startWorkerOn(l.host('p2'), 'prefill', ARGS, home.dir),
    startWorkerOn(l.host('d1'), 'decode', ARGS, home.dir),
  ]);
  procs.push(p1, p2, d1);
  const keys = await writeJson(home.dir, 'keys.json', KEYS);
  [router, loadOnly, leaky] = await Promise.all([
    startRouterOn(
      l.host('router'),
      { prefills: [p1, p2], decodes: [d1], args: ['--api-keys', keys, '--context-length', '1024'] },
      home.dir,
    ),
    startRouterOn(
      l.host('loadonly'),
      {
        prefills: [p1, p2],
        decodes: [d1],
        args: ['--api-keys', keys, '--context-length', '1024', '--routing', 'load'],
      },
      home.dir,
    ),
    startRouterOn(
      l.host('leaky'),
      {
        prefills: [p1, p2],
        decodes: [d1],
        args: ['--api-keys', keys, '--context-length', '1024'],
        env: { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'share-prefix-index-across-tenants' },
      },
      home.dir,
    ),
  ]);
  procs.push(router, loadOnly, leaky);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  lan?.close();
});

interface Routing {
  byPrefix: number;
  byLoad: number;
  loadReasons: Record<string, number>;
  workers: { url: string; hitTokens: number; lookupTokens: number }[];
}
const routing = async (r: HostRouter): Promise<Routing> => (await health(r.url)).body['routing'] as Routing;
const hits = async (w: HostWorker): Promise<number> =>
  ((await detail(w))['prefixCache'] as { hitTokens: number }).hitTokens;
/** Waits until the router has polled a report in which some prefill holds tenant's hashes. */
const reported = (r: HostRouter, w: HostWorker[]) =>
  waitUntil(
    "the prefills' reports to reach the router",
    async () => {
      const ws = (await routing(r)).workers;
      const mine = await Promise.all(w.map(async (x) => (await detail(x))['prefixCache'] as { lookupTokens: number }));
      return w.every((x, i) => ws.find((y) => y.url === x.url)?.lookupTokens === mine[i]?.lookupTokens);
    },
    10_000,
  );

describe.skipIf(unavailable !== undefined)('prefix-aware routing, keyed by tenant', () => {
  const SYSTEM = promptIds(160, 4000); // 10 full pages

  it("a tenant's repeated prefix goes to the prefill that cached it, turn after turn", async () => {
    await greedyIds(router.client('sk-a'), SYSTEM, 4);
    await reported(router, [p1, p2]);
    let conversation = [...SYSTEM];
    for (let turn = 0; turn < 3; turn++) {
      const before = await routing(router);
      const hitsBefore = await Promise.all([p1, p2].map(hits));
      conversation = [...conversation, ...promptIds(20, 50 + turn)];
      const reply = await greedyIds(router.client('sk-a'), conversation, 8);
      conversation = [...conversation, ...reply];
      const after = await routing(router);
      expect(after.byPrefix - before.byPrefix).toBe(1);
      const hitsAfter = await Promise.all([p1, p2].map(hits));
      const grew = [0, 1].filter((i) => (hitsAfter[i] as number) > (hitsBefore[i] as number));
      expect(grew).toHaveLength(1);
      await reported(router, [p1, p2]);
    }
  });

  it("tenant b's identical prompt is never routed by tenant a's prefix, and finds nothing cached", async () => {
    await reported(router, [p1, p2]);
    const before = await routing(router);
    const hitsBefore = await Promise.all([p1, p2].map(hits));
    await greedyIds(router.client('sk-b'), [...SYSTEM, ...promptIds(20, 50)], 4);
    const after = await routing(router);
    expect(after.byPrefix).toBe(before.byPrefix);
    expect((after.loadReasons['no-match'] ?? 0) - (before.loadReasons['no-match'] ?? 0)).toBe(1);
    expect(await Promise.all([p1, p2].map(hits))).toEqual(hitsBefore);
    // and tenant a's same prompt still routes by prefix
    await greedyIds(router.client('sk-a'), [...SYSTEM, ...promptIds(20, 50)], 4);
    expect((await routing(router)).byPrefix).toBe(after.byPrefix + 1);
  });

  it("negative control: with share-prefix-index-across-tenants, tenant c's identical prompt routes by another tenant's prefix", async () => {
    await reported(leaky, [p1, p2]);
    const before = await routing(leaky);
    await greedyIds(leaky.client('sk-c'), [...SYSTEM, ...promptIds(20, 50)], 4);
    expect((await routing(leaky)).byPrefix).toBe(before.byPrefix + 1);
  });

  it("a prefill's /health names no tenant, and a guessed prompt cannot be confirmed against it without the secret", async () => {
    const reports = await Promise.all(
      [p1, p2].map(async (w) => ((await detail(w))['prefixCache'] as { tenants: Record<string, string[]> }).tenants),
    );
    const tags = reports.flatMap((t) => Object.keys(t));
    const hashes = reports.flatMap((t) => Object.values(t).flat());
    expect(hashes.length).toBeGreaterThanOrEqual(10); // tenant a's SYSTEM pages are cached somewhere
    for (const tag of tags) expect(tag).toMatch(/^[0-9a-f]{16}$/);
    for (const name of Object.values(KEYS)) expect(tags).not.toContain(name);
    // What an outsider can compute: the old scheme (tenant-name seed), or a guessed secret.
    for (const guesser of [new PrefixHasher('', true), new PrefixHasher('not-the-cluster-secret-0123456789')]) {
      const guess = guesser.blockHashes(guesser.tenantTag('a'), SYSTEM, 16);
      expect(hashes.some((h) => guess.includes(h))).toBe(false);
    }
  });

  it('the load-only router over the same workers never routes by prefix', async () => {
    for (let i = 0; i < 3; i++) await greedyIds(loadOnly.client('sk-a'), [...SYSTEM, ...promptIds(10, 90 + i)], 2);
    const r = await routing(loadOnly);
    expect(r.byPrefix).toBe(0);
    expect(r.byLoad).toBeGreaterThanOrEqual(3);
  });

  it("/metrics: routed by prefix vs by load, and each prefill's hit rate", async () => {
    const m = await scrape(router.url);
    const r = await routing(router);
    expect(m.get('tessera_router_routed_requests{by="prefix"}')).toBe(r.byPrefix);
    expect(m.get('tessera_router_routed_requests{by="load"}')).toBe(r.byLoad);
    expect(r.byPrefix).toBeGreaterThanOrEqual(4);
    for (const w of [p1, p2]) {
      const ratio = m.get(`tessera_prefix_cache_hit_ratio{worker="${w.url}"}`) as number;
      expect(ratio).toBeGreaterThanOrEqual(0);
      expect(ratio).toBeLessThanOrEqual(1);
    }
    expect(
      Math.max(...[p1, p2].map((w) => m.get(`tessera_prefix_cache_hit_tokens{worker="${w.url}"}`) as number)),
    ).toBeGreaterThan(0);
  });
});
