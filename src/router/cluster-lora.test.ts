// ClusterLora against workers that are small HTTP servers answering the admin routes as a worker
// does: a load reaches every up worker with the cluster secret; one refusing, answering another
// digest or not answering fails it with that worker's reason, and every worker that may hold the
// adapter is told to unload it (rollback); negative control `lora-no-rollback`.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS, TesseraError } from '../core/index.js';
import { ClusterLora } from './cluster-lora.js';
import type { WorkerEntry } from './workers.js';

const SECRET = 'cluster-secret-0123456789';
const DIGEST = 'd'.repeat(32);

interface FakeWorker {
  readonly entry: WorkerEntry;
  /** Each call: route and body. */
  readonly calls: { route: string; body: Record<string, unknown>; auth: string | undefined }[];
  close(): Promise<void>;
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A worker whose load answers `load` (status and body). */
async function worker(role: 'prefill' | 'decode', load: { status: number; body: object }): Promise<FakeWorker> {
  const calls: FakeWorker['calls'] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString()));
    req.on('end', () => {
      const route = (req.url ?? '').replace('/v1/', '');
      calls.push({ route, body: JSON.parse(text) as Record<string, unknown>, auth: req.headers.authorization });
      const answer = route === 'load_lora_adapter' ? load : { status: 200, body: { unloaded: true } };
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const entry = { url, role, state: 'up', admitted: true, draining: false } as WorkerEntry;
  return { entry, calls, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const ok = { status: 200, body: { name: 'c', digest: DIGEST } };

function cluster(workers: readonly FakeWorker[], faults: FaultSet = NO_FAULTS) {
  let refreshed = 0;
  const lora = new ClusterLora({
    workers: () => workers.map((w) => w.entry),
    refresh: async () => void refreshed++,
    clusterSecret: SECRET,
    fileDigest: async () => DIGEST,
    timeoutMs: 2_000,
    faults,
  });
  return { lora, refreshed: () => refreshed };
}

const routes = (w: FakeWorker) => w.calls.map((c) => c.route);

describe('ClusterLora: a hot load on every worker, all or nothing', () => {
  it('loads on every up worker with the cluster secret, then polls their /health before answering', async () => {
    const ws = await Promise.all([worker('prefill', ok), worker('decode', ok)]);
    const c = cluster(ws);
    expect(await c.lora.loadLora('c', '/adapters/c.gguf', 1)).toBe(DIGEST);
    for (const w of ws)
      expect(w.calls).toEqual([
        {
          route: 'load_lora_adapter',
          body: { lora_name: 'c', lora_path: '/adapters/c.gguf' },
          auth: `Bearer ${SECRET}`,
        },
      ]);
    expect(c.refreshed()).toBe(1);
    await c.lora.unloadLora('c');
    for (const w of ws) expect(routes(w)).toEqual(['load_lora_adapter', 'unload_lora_adapter']);
  });

  it('a worker that read another digest fails the load (500: config_invalid); both are rolled back', async () => {
    const ws = await Promise.all([
      worker('prefill', ok),
      worker('decode', { status: 200, body: { digest: 'e'.repeat(32) } }),
    ]);
    const error = await cluster(ws)
      .lora.loadLora('c', '/adapters/c.gguf', 1)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TesseraError);
    expect((error as TesseraError).code).toBe('config_invalid');
    expect((error as Error).message).toMatch(/decode .* loaded c with digest e+, the router read d+/);
    for (const w of ws) expect(routes(w)).toEqual(['load_lora_adapter', 'unload_lora_adapter']);
  });

  it("a worker's refusal fails it with that worker's reason (400); only the others are rolled back", async () => {
    const refused = { status: 400, body: { error: { message: 'a LoRA adapter named c is already loaded' } } };
    const ws = await Promise.all([worker('prefill', ok), worker('decode', refused)]);
    const error = await cluster(ws)
      .lora.loadLora('c', '/adapters/c.gguf', 1)
      .catch((e: unknown) => e);
    expect((error as TesseraError).code).toBe('invalid_request');
    expect((error as Error).message).toMatch(/decode .* refused it \(a LoRA adapter named c is already loaded\)/);
    expect(routes(ws[0]!)).toEqual(['load_lora_adapter', 'unload_lora_adapter']);
    expect(routes(ws[1]!)).toEqual(['load_lora_adapter']); // its own adapter of that name stays
  });

  it('a worker that does not answer fails it (503: overloaded), and it is told to unload too', async () => {
    const ws = await Promise.all([worker('prefill', ok), worker('decode', ok)]);
    await ws[1]!.close();
    const error = await cluster(ws)
      .lora.loadLora('c', '/adapters/c.gguf', 1)
      .catch((e: unknown) => e);
    expect((error as TesseraError).code).toBe('overloaded');
    expect(routes(ws[0]!)).toEqual(['load_lora_adapter', 'unload_lora_adapter']);
  });

  it('without an up worker of each role nothing is loaded', async () => {
    const ws = [await worker('prefill', ok)];
    const error = await cluster(ws)
      .lora.loadLora('c', '/adapters/c.gguf', 1)
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/no decode worker is up/);
    expect(ws[0]!.calls).toEqual([]);
  });

  it('a worker that restarted without a hot-loaded adapter gets it again; one holding it is left alone', async () => {
    const ws = await Promise.all([worker('prefill', ok), worker('decode', ok)]);
    const c = cluster(ws);
    await c.lora.loadLora('c', '/adapters/c.gguf', 1);
    ws[0]!.entry.limits = { adapters: { c: DIGEST } } as unknown as WorkerEntry['limits'];
    ws[1]!.entry.limits = { adapters: {} } as unknown as WorkerEntry['limits']; // restarted: its /health lacks c
    await c.lora.reconcile();
    expect(routes(ws[0]!)).toEqual(['load_lora_adapter']);
    expect(routes(ws[1]!)).toEqual(['load_lora_adapter', 'load_lora_adapter']);
    expect(c.refreshed()).toBe(2);
    await c.lora.unloadLora('c');
    ws[1]!.entry.limits = { adapters: {} } as unknown as WorkerEntry['limits'];
    await c.lora.reconcile(); // unloaded: nothing to give
    expect(routes(ws[1]!)).toEqual(['load_lora_adapter', 'load_lora_adapter', 'unload_lora_adapter']);
  });

  it('negative control lora-no-rollback: the worker that loaded it keeps it', async () => {
    const ws = await Promise.all([
      worker('prefill', ok),
      worker('decode', { status: 200, body: { digest: 'e'.repeat(32) } }),
    ]);
    await expect(
      cluster(ws, new FaultSet(['lora-no-rollback'])).lora.loadLora('c', '/adapters/c.gguf', 1),
    ).rejects.toThrow(/digest/);
    expect(routes(ws[0]!)).toEqual(['load_lora_adapter']);
  });
});
