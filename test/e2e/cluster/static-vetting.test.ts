// Static workers are vetted (--prefill/--decode URLs, each on its own namespace host): a router
// pairs one only after its /health, model fingerprint, KV layout and cluster secret check out,
// the same checks as a worker that joins by DNS. The static list has a prefill of another model
// (listed first: the layout most of them report is the reference, not the first listed), one with
// another page size and one with another cluster secret beside a good prefill and decode.
//   vetting  the three are `misconfigured` in /health with the reason, logged, and never take a
//            step; requests are served by the good pair
//   control  a router with `skip-join-check` (its scope: static and DNS workers) takes all five as up
//   probes   the router's readiness and liveness paths, read from deploy/router.yaml, asked
//            anonymously of a router with --api-keys: readiness 200 {"status":"ok"} while a pair
//            is up and 503 {"status":"unhealthy"} once its prefill is gone; liveness 200 in both
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { genModel } from '../../../src/gen/index.js';
import { detail, greedyIds, promptIds, useTestHome, waitUntil } from '../pd/support.js';
import { ROOT } from '../support/process.js';
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

const unavailable = namespacesOrWarn('test/e2e/cluster/static-vetting.test.ts');

const ARGS = ['--context-length', '512', '--kv-pages', '96'];
const API_KEY = 'static-vetting-key-0123456789';

const home = useTestHome();
let lan: Lan | undefined;
const procs: { stop(): Promise<unknown> }[] = [];
let pOther: HostWorker, pLayout: HostWorker, pSecret: HostWorker, p1: HostWorker, d1: HostWorker;
let router: HostRouter, unchecked: HostRouter;

beforeAll(async () => {
  if (unavailable !== undefined) return;
  const other = join(home.dir, 'tiny-seed-2');
  await genModel({ preset: 'tiny', format: 'hf', out: other, seed: 2 });
  const keys = join(home.dir, 'api-keys.json');
  await writeFile(keys, JSON.stringify({ [API_KEY]: 'tenant-a' }));
  const l = createLan();
  lan = l;
  const start = (name: string, role: 'prefill' | 'decode', extra: string[] = [], env: Record<string, string> = {}) =>
    startWorkerOn(l.host(name), role, [...ARGS, ...extra], home.dir, env);
  const workers = await Promise.all([
    start('pother', 'prefill', ['--model', other]),
    start('playout', 'prefill', ['--page-size', '32']),
    start('psecret', 'prefill', [], { TESSERA_CLUSTER_SECRET: 'another-cluster-secret-0123456789' }),
    start('p1', 'prefill'),
    start('d1', 'decode'),
  ]);
  procs.push(...workers);
  [pOther, pLayout, pSecret, p1, d1] = workers as [HostWorker, HostWorker, HostWorker, HostWorker, HostWorker];
  const on = { prefills: [pOther, pLayout, pSecret, p1], decodes: [d1], waitForUp: 2 };
  [router, unchecked] = await Promise.all([
    startRouterOn(l.host('router'), { ...on, args: ['--context-length', '512', '--api-keys', keys] }, home.dir),
    startRouterOn(
      l.host('unchecked'),
      {
        ...on,
        args: ['--context-length', '512'],
        env: { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'skip-join-check' },
      },
      home.dir,
    ),
  ]);
  procs.push(router, unchecked);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  lan?.close();
});

const stateOf = async (r: HostRouter, w: HostWorker) => (await routerWorkers(r)).find((x) => x.url === w.url);
/** r refuses every wrong worker (and pairs the good ones). */
const refusesTheWrongOnes = async (r: HostRouter): Promise<boolean> => {
  const states = await Promise.all([pOther, pLayout, pSecret, p1, d1].map(async (w) => (await stateOf(r, w))?.state));
  return states.join() === 'misconfigured,misconfigured,misconfigured,up,up';
};

describe.skipIf(unavailable !== undefined)('static workers (--prefill/--decode URLs) on their own hosts', () => {
  it('pairs only those whose fingerprint, KV layout and secret check out; says why of the others', async () => {
    const expected: [HostWorker, RegExp][] = [
      [pOther, /^not admitted: its model fingerprint [0-9a-f]{16} differs from http/],
      [pLayout, /^not admitted: its KV layout \(page 32 tokens/],
      [pSecret, /^not admitted: cluster address [\d.:]+: /],
    ];
    await waitUntil('the three wrong workers to be refused', () => refusesTheWrongOnes(router), 30_000);
    for (const [w, why] of expected) {
      const s = (await stateOf(router, w)) as { state: string; error?: string };
      expect(s.error, w.name).toMatch(why);
      expect(router.stderr()).toContain(`prefill ${w.url} not admitted (never paired): `);
    }
    const client = router.client(API_KEY);
    const outputs = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => greedyIds(client, promptIds(40, 700 + i), 4)));
    expect(outputs.map((o) => o.length)).toEqual([4, 4, 4, 4, 4, 4]);
    for (const [w] of expected) expect(Number((await detail(w))['steps']), w.name).toBe(0);
    expect(Number((await detail(p1))['steps'])).toBeGreaterThan(0);
  });

  it('negative control: with skip-join-check the router takes every static worker as up', async () => {
    await waitUntil(
      'the unchecked router to see all five up',
      async () => (await routerWorkers(unchecked)).every((w) => w.state === 'up'),
      30_000,
    );
    expect(await refusesTheWrongOnes(unchecked)).toBe(false);
  });

  it("answers the manifests' probes anonymously: readiness follows the pair, liveness stays 200", async () => {
    const docs = parseAllDocuments(readFileSync(join(ROOT, 'deploy', 'router.yaml'), 'utf8')).map((d) => d.toJS());
    const container = (
      docs.find((d) => d.kind === 'Deployment') as {
        spec: { template: { spec: { containers: Record<string, { httpGet: { path: string } }>[] } } };
      }
    ).spec.template.spec.containers[0] as Record<string, { httpGet: { path: string } }>;
    const readiness = container['readinessProbe']?.httpGet.path as string;
    const liveness = container['livenessProbe']?.httpGet.path as string;
    const ask = async (path: string) => {
      const response = await fetch(`${router.url}${path}`, { signal: AbortSignal.timeout(5_000) });
      return { status: response.status, body: (await response.json()) as unknown };
    };
    expect(await ask(readiness)).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await ask(liveness)).toEqual({ status: 200, body: { status: 'alive' } });
    await p1.stop();
    await waitUntil('the router to be not ready', async () => (await ask(readiness)).status === 503, 30_000);
    expect(await ask(readiness)).toEqual({ status: 503, body: { status: 'unhealthy' } });
    expect(await ask(liveness)).toEqual({ status: 200, body: { status: 'alive' } });
  });
});
