// Discovery over real DNS: a router that knows its workers only by name (--prefill-dns,
// --decode-dns), answered by dnsmasq in its own namespace host, whose records the test changes
// while clients keep sending requests. Every worker listens on its host's address and the same
// HTTP port (the headless-Service convention).
//   join    a prefill added to DNS under load takes requests within a measured time
//   vetting a worker with the wrong cluster secret, and one with another KV layout, are named in
//           DNS but never paired (misconfigured, with the reason; they never take a step);
//           negative control: a router with skip-join-check takes them as up
//   drain   a prefill removed from DNS under load: no new pairs, zero failed requests, then it
//           leaves the router's registry and holds no page; added back, it is used again
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allIdle, detail, greedyIds, promptIds, useTestHome, waitUntil } from '../pd/support.js';
import { startDnsmasq, type Dns } from './dnsmasq.js';
import {
  createLan,
  namespacesOrWarn,
  routerWorkers,
  startRouterOn,
  startWorkerOn,
  type HostRouter,
  type HostWorker,
  type Lan,
} from './support.js';

const unavailable = namespacesOrWarn('test/e2e/cluster/discovery.test.ts');

const PORT = '8100'; // every worker's HTTP port: each host is its own network namespace
const ARGS = ['--port', PORT, '--context-length', '512', '--kv-pages', '96'];
const P = 'prefill.tessera.test';
const D = 'decode.tessera.test';

const home = useTestHome();
let lan: Lan | undefined;
let dns: Dns | undefined;
const procs: { stop(): Promise<unknown> }[] = [];
let p1: HostWorker, p2: HostWorker, d1: HostWorker, pSecret: HostWorker, pLayout: HostWorker;
let router: HostRouter, unchecked: HostRouter;

beforeAll(async () => {
  if (unavailable !== undefined) return;
  const l = createLan();
  lan = l;
  const dnsHost = l.host('dns');
  dns = await startDnsmasq(dnsHost, await mkdtemp(join(home.dir, 'dns-')));
  const start = (name: string, role: 'prefill' | 'decode', extra: string[] = [], env: Record<string, string> = {}) =>
    startWorkerOn(l.host(name), role, [...ARGS, ...extra], home.dir, env);
  const workers = await Promise.all([
    start('p1', 'prefill'),
    start('p2', 'prefill'),
    start('d1', 'decode'),
    start('psecret', 'prefill', [], { TESSERA_CLUSTER_SECRET: 'another-cluster-secret-0123456789' }),
    start('playout', 'prefill', ['--page-size', '32']),
  ]);
  procs.push(...workers);
  [p1, p2, d1, pSecret, pLayout] = workers as [HostWorker, HostWorker, HostWorker, HostWorker, HostWorker];
  await dns.set({ [P]: [p1.host.ip], [D]: [d1.host.ip] });
  const routerHost = l.host('router');
  routerHost.resolveVia(dns.ip);
  const uncheckedHost = l.host('unchecked');
  uncheckedHost.resolveVia(dns.ip);
  const dnsArgs = [
    '--prefill-dns',
    `${P}:${PORT}`,
    '--decode-dns',
    `${D}:${PORT}`,
    '--dns-interval',
    '300',
    '--context-length',
    '512',
  ];
  [router, unchecked] = await Promise.all([
    startRouterOn(routerHost, { args: dnsArgs, waitForUp: 2 }, home.dir),
    startRouterOn(
      uncheckedHost,
      { args: dnsArgs, waitForUp: 2, env: { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'skip-join-check' } },
      home.dir,
    ),
  ]);
  procs.push(router, unchecked);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await dns?.stop();
  lan?.close();
});

/** Clients sending requests until stopped: every outcome, with when it started. */
function load(concurrency: number) {
  const outcomes: { startedMs: number; ok: boolean; error?: string }[] = [];
  let running = true;
  let seq = 0;
  const loops = Array.from({ length: concurrency }, async () => {
    while (running) {
      const startedMs = Date.now();
      const n = seq++;
      try {
        const ids = await greedyIds(router.client(), promptIds(40 + (n % 5) * 30, 100 + n * 37), 12);
        outcomes.push({ startedMs, ok: ids.length === 12 });
      } catch (e) {
        outcomes.push({ startedMs, ok: false, error: String(e) });
      }
    }
  });
  return { outcomes, stop: async () => ((running = false), await Promise.all(loops), outcomes) };
}

const steps = async (w: HostWorker): Promise<number> => Number((await detail(w))['steps']);

describe.skipIf(unavailable !== undefined)(
  'workers found by DNS (dnsmasq), joining and leaving a running cluster',
  () => {
    it('starts from DNS alone: the router pairs the workers its names resolve to', async () => {
      const ws = await routerWorkers(router);
      expect(ws.map((w) => [w.url, w.state]).sort()).toEqual(
        [
          [d1.url, 'up'],
          [p1.url, 'up'],
        ].sort(),
      );
      expect(await greedyIds(router.client(), promptIds(30, 1), 4)).toHaveLength(4);
    });

    it('a prefill added to DNS under load takes requests; bad joiners are never paired', async () => {
      const l = load(3);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const added = Date.now();
      await dns?.set({ [P]: [p1.host.ip, p2.host.ip, pSecret.host.ip, pLayout.host.ip], [D]: [d1.host.ip] });
      await waitUntil('p2 to take a request', async () => (await steps(p2)) > 0, 30_000);
      const joinMs = Date.now() - added;
      await waitUntil(
        'the bad joiners to be judged',
        async () => {
          const ws = await routerWorkers(router);
          return [pSecret, pLayout].every((b) => ws.find((w) => w.url === b.url)?.state === 'misconfigured');
        },
        30_000,
      );
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const outcomes = await l.stop();
      console.log(
        `[measured under contention] join: p2 took its first request ${joinMs} ms after the DNS change (re-resolve every 300 ms); ${outcomes.length} requests under load`,
      );
      expect(outcomes.filter((o) => !o.ok)).toEqual([]);
      const ws = (await routerWorkers(router)) as unknown as { url: string; error?: string }[];
      expect(ws.find((w) => w.url === pSecret.url)?.error).toMatch(/does not hold the cluster secret/);
      expect(ws.find((w) => w.url === pLayout.url)?.error).toMatch(/KV layout/);
      expect(await steps(pSecret)).toBe(0);
      expect(await steps(pLayout)).toBe(0);
      // Negative control: a router with skip-join-check takes both bad joiners as up (pairable).
      const loose = await routerWorkers(unchecked);
      expect([pSecret, pLayout].map((b) => loose.find((w) => w.url === b.url)?.state)).toEqual(['up', 'up']);
    });

    it('a prefill removed from DNS under load is drained: zero failed requests, then it leaves; added back, it is used again', async () => {
      const l = load(3);
      await new Promise((resolve) => setTimeout(resolve, 800));
      const removed = Date.now();
      await dns?.set({ [P]: [p2.host.ip], [D]: [d1.host.ip] });
      await waitUntil(
        "p1 to leave the router's registry",
        async () => !(await routerWorkers(router)).some((w) => w.url === p1.url),
        30_000,
      );
      const drainMs = Date.now() - removed;
      const stepsAfterDrain = await steps(p1);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const outcomes = await l.stop();
      console.log(
        `[measured under contention] drain: p1 left the registry ${drainMs} ms after the DNS change; ${outcomes.length} requests, ${outcomes.filter((o) => !o.ok).length} failed`,
      );
      expect(outcomes.filter((o) => !o.ok)).toEqual([]);
      expect(await steps(p1)).toBe(stepsAfterDrain); // nothing new reached it
      await allIdle([p1, p2, d1]);

      await dns?.set({ [P]: [p1.host.ip, p2.host.ip], [D]: [d1.host.ip] });
      const before = await steps(p1);
      await waitUntil(
        'p1 to be paired again',
        async () => {
          await greedyIds(router.client(), promptIds(20, Date.now() % 1000), 2);
          return (await steps(p1)) > before;
        },
        30_000,
      );
    });
  },
);
