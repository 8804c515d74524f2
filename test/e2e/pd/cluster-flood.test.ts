// Issue 33 against a real `tessera up` (router, prefill, decode), with raw sockets as an attacker
// on the router's host holds them:
//   - 300 silent connections from 127.0.0.1 (the router's own address) on the decode worker's
//     cluster port, before the router ever dialed it: requests through the router (the openai
//     client) all succeed; the caps closed the oldest strangers (before: the router's dial was
//     refused at the per-source cap, 502 transfer_failed "... closed (read ECONNRESET)");
//   - silent sockets past the HTTP connection cap (here 40) on the router's and on each worker's
//     HTTP port: the openai client and the workers' /health are still answered.
// Negative control at the end: a second cluster with refuse-at-preauth-cap fails the first.
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Attacker } from '../support/attacker.js';
import { detail, promptIds, spawnTessera, useTestHome, type Proc } from './support.js';

const HTTP_CAP = 40;
const CLUSTER_FLOOD = 300; // past both pre-auth caps (256 per node, 32 per source)
const home = useTestHome();
const attacker = new Attacker();
afterEach(() => attacker.destroyAll());

interface Cluster {
  readonly proc: Proc;
  readonly routerUrl: string;
  readonly workers: readonly { name: string; url: string }[];
}

async function startCluster(name: string, env: Record<string, string>): Promise<Cluster> {
  const proc = spawnTessera('up', ['up', '--port', '0', '--context-length', '512'], home.dir, {
    TESSERA_HTTP_LIMITS: `maxConnections=${HTTP_CAP}`,
    ...env,
  });
  const routerUrl = (await proc.waitFor(/router +http: (http:\/\/[\d.]+:\d+)/))[1] as string;
  await proc.waitFor(/listening on/);
  const workers = ['prefill-1', 'decode-1'].map((w) => ({
    name: w,
    url: new RegExp(`${w} +http: (http://[\\d.]+:\\d+)`).exec(proc.stdout())?.[1] as string,
  }));
  return { proc, routerUrl, workers };
}

const port = (url: string): number => Number(new URL(url).port);

/** Floods decode's cluster port from 127.0.0.1, then sends four requests through the router: their outcomes. */
async function requestsDuringClusterFlood(c: Cluster): Promise<string[]> {
  const decode = await detail(c.workers[1] as { url: string });
  const clusterPort = port(`http://${String(decode['address'])}`);
  await attacker.flood(clusterPort, CLUSTER_FLOOD, ['127.0.0.1']);
  const client = new OpenAI({ baseURL: `${c.routerUrl}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60_000 });
  const outcomes: string[] = [];
  for (let i = 0; i < 4; i++)
    outcomes.push(
      await client.completions
        .create({ model: 'builtin:tiny', prompt: promptIds(12, 40 + i), max_tokens: 4, temperature: 0 })
        .then(
          (r) => `ok (${r.choices[0]?.finish_reason})`,
          (e: unknown) => `${(e as { status?: number }).status} ${(e as Error).message}`,
        ),
    );
  return outcomes;
}

describe('tessera up: strangers on the cluster and HTTP ports', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster('up', {});
  });
  afterAll(async () => {
    await cluster?.proc.stop();
  });

  it("serves through the router while strangers from the router's address flood decode's cluster port", async () => {
    expect(await requestsDuringClusterFlood(cluster)).toEqual(Array(4).fill('ok (length)'));
    const decode = await detail(cluster.workers[1] as { url: string });
    expect(decode.transport['refusedAtCap']).toBeGreaterThanOrEqual(CLUSTER_FLOOD - 256);
  });

  it("answers the openai client and the workers' /health with silent sockets past each HTTP port's cap", async () => {
    for (const url of [cluster.routerUrl, ...cluster.workers.map((w) => w.url)])
      await attacker.flood(port(url), HTTP_CAP + 10, ['127.0.0.2', '127.0.0.3']);
    const client = new OpenAI({ baseURL: `${cluster.routerUrl}/v1`, apiKey: 'none', maxRetries: 0 });
    const r = await client.completions.create({ model: 'builtin:tiny', prompt: promptIds(8, 9), max_tokens: 2 });
    expect(r.choices[0]?.finish_reason).toBe('length');
    for (const w of cluster.workers) expect([w.name, (await fetch(`${w.url}/health`)).status]).toEqual([w.name, 200]);
  });
});

describe('negative control: `up` with refuse-at-preauth-cap', () => {
  let faulty: Cluster;
  beforeAll(async () => {
    faulty = await startCluster('up-faulty', { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'refuse-at-preauth-cap' });
  });
  afterAll(async () => {
    await faulty?.proc.stop();
  });

  it("the router's dial is refused at the per-source cap: 502 for the requests during the flood", async () => {
    const outcomes = await requestsDuringClusterFlood(faulty);
    process.stdout.write(`negative control: ${JSON.stringify(outcomes)}\n`);
    expect(outcomes.filter((o) => o.startsWith('502'))).not.toHaveLength(0);
  });
});
