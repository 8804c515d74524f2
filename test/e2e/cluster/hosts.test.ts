// The PD essentials with every role on its own host: each process runs in its own network
// namespace (test/e2e/support/netns.ts) and listens on that host's address (10.213.K.n), never
// loopback; the test talks to the routers over the bridge, with the official openai client.
//   transparency   the cluster's greedy output equals `tessera serve`'s (both --deterministic)
//   the incident   placeholder-done prefill -> clean decode fails closed (502, no token); the
//                  negative control (decode with skip-page-check) returns 200 with other output
//   admission      a prompt that fits the prefill but not the small decode: 400 before any
//                  Reserve, no epoch moves on either host
//   disconnect     a client leaving mid-stream: every page comes back on every host
//   kill -9        a prefill host's process mid-transfer (retried on the other: same tokens),
//                  then a decode's mid-stream (an error, never a clean end); survivors serve on
// Skipped, loudly, only where namespaces cannot be made (not root, no iproute2).
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allIdle, detail, greedyIds, health, promptIds, useTestHome, waitUntil } from '../pd/support.js';
import {
  createLan,
  namespacesOrWarn,
  startRouterOn,
  startServeOn,
  startWorkerOn,
  type HostRouter,
  type HostWorker,
  type Lan,
} from './support.js';

const unavailable = namespacesOrWarn('test/e2e/cluster/hosts.test.ts');

const home = useTestHome();
let lan: Lan | undefined;
const procs: { stop(): Promise<unknown> }[] = [];
let p1: HostWorker,
  p2: HostWorker,
  pBad: HostWorker,
  d1: HostWorker,
  d2: HostWorker,
  dSkip: HostWorker,
  dSmall: HostWorker;
let main: HostRouter, bad: HostRouter, control: HostRouter, asym: HostRouter;
let serve: Awaited<ReturnType<typeof startServeOn>>;

const ARGS = ['--context-length', '2048', '--kv-pages', '160', '--chunked-prefill-size', '32', '--deterministic'];
// Decode pools hold a retried 1,500-token request twice: its first reservation stays quarantined until the dead writer is declared dead.
const DECODE_ARGS = [
  '--context-length',
  '2048',
  '--kv-pages',
  '256',
  '--chunked-prefill-size',
  '32',
  '--deterministic',
];
const SMALL = ['--context-length', '128', '--kv-pages', '8', '--deterministic'];
const faults = (names: string) => ({ TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: names });
const ENV = { TESSERA_PD_TIMEOUTS: 'abortAckMs=1500,abortRetries=1' };

beforeAll(async () => {
  if (unavailable !== undefined) return;
  const l = createLan();
  lan = l;
  const h = (name: string) => l.host(name);
  const workers = await Promise.all([
    startWorkerOn(h('p1'), 'prefill', ARGS, home.dir, ENV),
    startWorkerOn(h('p2'), 'prefill', ARGS, home.dir, ENV),
    startWorkerOn(h('pbad'), 'prefill', ARGS, home.dir, { ...ENV, ...faults('placeholder-done') }),
    startWorkerOn(h('d1'), 'decode', DECODE_ARGS, home.dir, ENV),
    startWorkerOn(h('d2'), 'decode', DECODE_ARGS, home.dir, ENV),
    startWorkerOn(h('dskip'), 'decode', DECODE_ARGS, home.dir, { ...ENV, ...faults('skip-page-check') }),
    startWorkerOn(h('dsmall'), 'decode', SMALL, home.dir, ENV),
  ]);
  procs.push(...workers);
  [p1, p2, pBad, d1, d2, dSkip, dSmall] = workers as [
    HostWorker,
    HostWorker,
    HostWorker,
    HostWorker,
    HostWorker,
    HostWorker,
    HostWorker,
  ];
  serve = await startServeOn(h('colo'), ['--context-length', '2048', '--kv-pages', '160', '--deterministic'], home.dir);
  procs.push(serve);
  [main, bad, control, asym] = await Promise.all([
    startRouterOn(
      h('rmain'),
      { prefills: [p1, p2], decodes: [d1, d2], args: ['--context-length', '2048'], env: ENV },
      home.dir,
    ),
    startRouterOn(h('rbad'), { prefills: [pBad], decodes: [d2] }, home.dir),
    startRouterOn(h('rctl'), { prefills: [pBad], decodes: [dSkip] }, home.dir),
    startRouterOn(h('rasym'), { prefills: [p1], decodes: [dSmall] }, home.dir),
  ]);
  procs.push(main, bad, control, asym);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  lan?.close();
});

const alive = (ws: HostWorker[]) => ws.filter((w) => w.child.exitCode === null && w.child.signalCode === null);

describe.skipIf(unavailable !== undefined)('PD across network-namespace hosts', () => {
  it('every process listens on its own host address, not loopback', () => {
    const all = [p1, p2, pBad, d1, d2, dSkip, dSmall];
    const ips = new Set(all.map((w) => w.host.ip));
    expect(ips.size).toBe(all.length);
    for (const w of all) {
      expect(w.url.startsWith(`http://${w.host.ip}:`)).toBe(true);
      expect(w.address.startsWith(`${w.host.ip}:`)).toBe(true);
    }
    expect(main.url.startsWith(`http://${main.host.ip}:`)).toBe(true);
    expect(main.url).not.toMatch(/127\.0\.0\.1/);
  });

  it("transparency: the cluster's greedy tokens equal tessera serve's", async () => {
    for (const [n, first] of [
      [5, 11],
      [40, 300],
      [130, 777],
    ] as const) {
      const prompt = promptIds(n, first);
      expect(await greedyIds(main.client(), prompt, 12)).toEqual(await greedyIds(serve.client(), prompt, 12));
    }
  });

  it('the incident fault fails closed across hosts; its negative control leaks', async () => {
    const prompt = promptIds(40, 3000);
    const error = await bad
      .client()
      .completions.create({ model: 'builtin:tiny', prompt, max_tokens: 8 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect(String((error as Error).message)).toMatch(/stamps cover 16 of the prompt's 40 tokens/);
    for (let i = 0; i < 3; i++) await greedyIds(control.client(), promptIds(60, 7000 + i), 4); // stale K/V in dskip's pages
    const reference = await greedyIds(serve.client(), prompt, 16);
    const leaked = await greedyIds(control.client(), prompt, 16);
    expect(leaked).toHaveLength(16);
    expect(leaked).not.toEqual(reference);
    await allIdle([pBad, d2]);
  });

  it('asymmetric admission: fits the prefill, not the decode -> 400 before any Reserve', async () => {
    const before = await Promise.all([p1, dSmall].map(async (w) => (await detail(w))['lastEpoch']));
    const error = await asym
      .client()
      .completions.create({ model: 'builtin:tiny', prompt: promptIds(200, 5), max_tokens: 4 })
      .catch((e: unknown) => e);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    const after = await Promise.all([p1, dSmall].map(async (w) => (await detail(w))['lastEpoch']));
    expect(after).toEqual(before);
    expect(await greedyIds(asym.client(), promptIds(20, 9), 4)).toHaveLength(4);
  });

  it('a client that disconnects mid-stream: every page on every host comes back', async () => {
    const controller = new AbortController();
    const stream = await main.client().completions.create(
      {
        model: 'builtin:tiny',
        prompt: promptIds(50, 123),
        max_tokens: 1900,
        ignore_eos: true,
        stream: true,
      } as never,
      { signal: controller.signal },
    );
    let n = 0;
    const ended = await (async () => {
      for await (const _ of stream as unknown as AsyncIterable<unknown>) if (++n === 3) controller.abort();
      return controller.signal.aborted ? 'aborted' : 'finished'; // the openai client ends its iteration quietly on abort
    })().catch(() => 'aborted');
    expect(ended).toBe('aborted');
    await waitUntil('the router to be idle', async () => (await health(main.url)).body['idle'] === true);
    await allIdle([p1, p2, d1, d2]);
  });

  it("kill -9 of a prefill host's process mid-transfer: retried on the other host, same tokens", async () => {
    const prompt = promptIds(1500, 4242);
    const requests = [0, 1].map(() => greedyIds(main.client(), prompt, 6));
    await waitUntil('p2 to be prefilling', async () => Number((await detail(p2))['active']) > 0, 60_000);
    p2.signal('SIGKILL');
    const [a, b] = await Promise.all(requests);
    expect(a).toHaveLength(6);
    expect(b).toEqual(a);
    expect(await greedyIds(serve.client(), prompt, 6)).toEqual(a);
    await allIdle([p1, d1, d2]);
  });

  it("kill -9 of a decode host's process mid-stream: an error, never a clean end; the survivor serves on", async () => {
    const stream = await main.client().completions.create({
      model: 'builtin:tiny',
      prompt: promptIds(30, 55),
      max_tokens: 1900,
      ignore_eos: true,
      stream: true,
    } as never);
    let killed: HostWorker | undefined;
    const ended = await (async () => {
      for await (const _ of stream as unknown as AsyncIterable<unknown>) {
        if (killed === undefined) {
          const holder = [];
          for (const d of [d1, d2]) if (Number((await detail(d))['active']) > 0) holder.push(d);
          killed = holder[0];
          killed?.signal('SIGKILL');
        }
      }
      return 'clean end';
    })().catch((e: unknown) => e);
    expect(killed).toBeDefined();
    expect(ended).not.toBe('clean end');
    await killed?.exited;
    const survivor = alive([d1, d2]);
    expect(survivor).toHaveLength(1);
    await waitUntil(
      'the router to see the dead decode down',
      async () =>
        ((await health(main.url)).body['workers'] as { url: string; state: string }[]).find(
          (w) => w.url === killed?.url,
        )?.state === 'down',
      30_000,
    );
    expect(await greedyIds(main.client(), promptIds(20, 31), 4)).toHaveLength(4);
    await allIdle([p1, ...survivor]);
  });
});
