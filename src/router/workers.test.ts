// The router's view of a worker's health: a worker that refuses connections is down at once; one
// that is only slow to answer (its event loop inside a long model step) stays up until
// MAX_SLOW_POLLS polls in a row time out.
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS } from '../core/index.js';
import { joinCheck } from './discovery.js';
import { MAX_SLOW_POLLS, WorkerRegistry } from './workers.js';

const HEALTH = {
  role: 'decode',
  address: '127.0.0.1:9',
  contextLength: 64,
  pageSize: 16,
  kvPages: 8,
  kvBytesPerToken: 64,
  kvDtype: 'f32',
  modelFingerprint: 'a11ce5a11ce5a11c',
};

/** How long a slow worker takes to answer /health: past the registry's fetch timeout. */
const SLOW_MS = 2500;

interface FakeWorker {
  readonly url: string;
  /** ms to wait before answering /health. */
  delayMs: number;
  close(): Promise<void>;
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function fakeWorker(health: Record<string, unknown> = HEALTH): Promise<FakeWorker> {
  const fake = { delayMs: 0 } as FakeWorker;
  const server = createServer((_req, res) => {
    setTimeout(
      () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(health)),
      fake.delayMs,
    );
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return Object.assign(fake, {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

function registry(url: string): WorkerRegistry {
  // A timeout well above a prompt answer on a loaded test machine, well below a slow one (SLOW_MS).
  return new WorkerRegistry({ prefills: [], decodes: [url], pollIntervalMs: 60_000, fetchTimeoutMs: 1000 });
}

describe('WorkerRegistry health polling', () => {
  it('keeps a slow worker up until MAX_SLOW_POLLS polls in a row time out, and forgets slowness once it answers', async () => {
    const w = await fakeWorker();
    const r = registry(w.url);
    await r.pollAll();
    const entry = r.entries[0]!;
    expect(entry.state).toBe('up');
    w.delayMs = SLOW_MS;
    for (let i = 1; i < MAX_SLOW_POLLS; i++) {
      await r.pollAll();
      expect(entry.state, `after ${i} slow polls`).toBe('up');
    }
    w.delayMs = 0;
    await r.pollAll();
    expect(entry.slowPolls).toBe(0);
    w.delayMs = SLOW_MS;
    for (let i = 0; i < MAX_SLOW_POLLS; i++) await r.pollAll();
    expect(entry.state).toBe('down');
    expect(entry.lastError).toMatch(/health/);
  });

  /**
   * A worker that answers at once, and a router whose own event loop is blocked past the poll's
   * timeout + 2 s during each of MAX_SLOW_POLLS polls: the worker's state and slow polls after.
   */
  async function afterRouterStalls(faults: FaultSet): Promise<[string, number]> {
    const w = await fakeWorker();
    const r = new WorkerRegistry({
      prefills: [],
      decodes: [w.url],
      pollIntervalMs: 60_000,
      fetchTimeoutMs: 1000,
      faults,
    });
    await r.pollAll();
    const entry = r.entries[0]!;
    for (let i = 0; i < MAX_SLOW_POLLS; i++) {
      const poll = r.pollAll();
      const until = Date.now() + 3_200; // the router's event loop busy past timeout + 2 s (workers.ts, ownStallMs)
      while (Date.now() < until) {
        // spin
      }
      await poll;
    }
    return [entry.state, entry.slowPolls];
  }

  it('does not count polls that timed out because the router itself was stalled (a long step): the worker stays up', async () => {
    // Before, each of these counted as a timed-out poll and the worker went down with the router's stall.
    expect(await afterRouterStalls(NO_FAULTS)).toEqual(['up', 0]);
  });

  it('negative control: with count-stalled-polls the router marks a healthy worker down for its own stalls', async () => {
    expect(await afterRouterStalls(new FaultSet(['count-stalled-polls']))).toEqual(['down', MAX_SLOW_POLLS]);
  });

  it('marks a worker that refuses connections down at once', async () => {
    const w = await fakeWorker();
    const r = registry(w.url);
    await r.pollAll();
    expect(r.entries[0]!.state).toBe('up');
    await w.close();
    await r.pollAll();
    expect(r.entries[0]!.state).toBe('down');
  });

  it('says the cluster is unavailable only once every worker of a role was polled and failed', async () => {
    const w = await fakeWorker();
    const other = await fakeWorker();
    const options = { prefills: [], pollIntervalMs: 60_000, fetchTimeoutMs: 400 };
    const r = new WorkerRegistry({ ...options, decodes: [w.url, other.url] });
    expect(r.unavailable()).toBeUndefined(); // not polled yet
    await r.pollAll();
    expect(r.unavailable()).toBeUndefined();
    await w.close();
    await r.pollAll();
    expect(r.unavailable()).toBeUndefined(); // one decode is still up
    await other.close();
    await r.pollAll();
    expect(r.unavailable()).toMatch(/^no decode worker is up \(.*down, GET .*\/health/);
    expect(new WorkerRegistry({ ...options, decodes: [] }).unavailable()).toBeUndefined(); // DNS may add some
  });

  it('never runs two polls of one worker at once', async () => {
    let requests = 0;
    const counting = createServer((_req, res) => {
      requests++;
      setTimeout(() => res.writeHead(200).end(JSON.stringify(HEALTH)), 30);
    });
    servers.push(counting);
    await new Promise<void>((resolve) => counting.listen(0, '127.0.0.1', resolve));
    const r = new WorkerRegistry({
      prefills: [],
      decodes: [`http://127.0.0.1:${(counting.address() as { port: number }).port}`],
      pollIntervalMs: 60_000,
      fetchTimeoutMs: 1000,
    });
    await Promise.all([r.pollAll(), r.pollAll(), r.pollAll()]);
    expect(requests).toBe(1);
  });
});

describe('WorkerRegistry join checks of static workers', () => {
  const vet = (e: Parameters<typeof joinCheck>[0], admitted: Parameters<typeof joinCheck>[1]) =>
    Promise.resolve(joinCheck(e, admitted));
  const prefill = (fingerprint: string, pageSize = 16) => ({
    ...HEALTH,
    role: 'prefill',
    modelFingerprint: fingerprint,
    pageSize,
  });

  it('vets every static worker; the layout most of them report is the reference, even when a wrong one is listed first', async () => {
    const wrong = await fakeWorker(prefill('b0b0b0b0b0b0b0b0'));
    const layout = await fakeWorker(prefill('a11ce5a11ce5a11c', 32));
    const good = [await fakeWorker(prefill('a11ce5a11ce5a11c')), await fakeWorker(prefill('a11ce5a11ce5a11c'))];
    const r = new WorkerRegistry({
      prefills: [wrong.url, layout.url, ...good.map((w) => w.url)],
      decodes: [],
      pollIntervalMs: 60_000,
      fetchTimeoutMs: 1000,
      vet,
    });
    expect(r.views().some((v) => v.up)).toBe(false); // nothing is usable before its checks
    await r.start();
    r.stop();
    const [w, l, g1, g2] = r.entries;
    expect([w?.state, l?.state, g1?.state, g2?.state]).toEqual(['misconfigured', 'misconfigured', 'up', 'up']);
    expect(w?.lastError).toMatch(/^not admitted: its model fingerprint b0b0b0b0b0b0b0b0 differs from http/);
    expect(l?.lastError).toMatch(/^not admitted: its KV layout \(page 32 tokens/);
    expect(r.views().map((v) => v.up)).toEqual([false, false, true, true]);
  });

  it('vets a static worker that was down at start once it answers, against those admitted', async () => {
    const good = await fakeWorker(prefill('a11ce5a11ce5a11c'));
    const late = await fakeWorker(prefill('b0b0b0b0b0b0b0b0'));
    const lateUrl = late.url;
    await late.close();
    const r = new WorkerRegistry({
      prefills: [good.url, lateUrl],
      decodes: [],
      pollIntervalMs: 60_000,
      fetchTimeoutMs: 1000,
      vet,
    });
    await r.start();
    r.stop();
    expect(r.entries.map((e) => e.state)).toEqual(['up', 'down']);
    const port = Number(new URL(lateUrl).port);
    const again = createServer((_req, res) => res.writeHead(200).end(JSON.stringify(prefill('b0b0b0b0b0b0b0b0'))));
    servers.push(again);
    await new Promise<void>((resolve) => again.listen(port, '127.0.0.1', resolve));
    await r.pollAll();
    expect(r.entries[1]?.state).toBe('misconfigured');
    expect(r.views().map((v) => v.up)).toEqual([true, false]);
  });

  it('checks a worker again when it comes back after it was down (another process may answer on its port)', async () => {
    const reference = await fakeWorker(prefill('a11ce5a11ce5a11c'));
    const first = await fakeWorker(prefill('a11ce5a11ce5a11c'));
    const url = first.url;
    const r = new WorkerRegistry({
      prefills: [reference.url, url],
      decodes: [],
      pollIntervalMs: 60_000,
      fetchTimeoutMs: 1000,
      vet,
    });
    await r.start();
    r.stop();
    expect(r.entries.map((e) => e.state)).toEqual(['up', 'up']);
    await first.close();
    await r.pollAll();
    expect(r.entries[1]?.state).toBe('down');
    const other = createServer((_req, res) => res.writeHead(200).end(JSON.stringify(prefill('b0b0b0b0b0b0b0b0'))));
    servers.push(other);
    await new Promise<void>((resolve) => other.listen(Number(new URL(url).port), '127.0.0.1', resolve));
    await r.pollAll();
    expect(r.entries[1]?.state).toBe('misconfigured');
    expect(r.entries[1]?.lastError).toMatch(/model fingerprint b0b0b0b0b0b0b0b0 differs/);
  });
});
