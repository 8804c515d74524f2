// Fair sharing between tenants on a cluster (issue 33): a real router, prefill and decode
// (separate processes), two API keys. The decode worker runs one request at a time
// (--max-running-requests 1), so while tenant A's flood of long prompts holds it, every other
// request waits in the router's WaitQueue. Tenant B's short requests arrive after all of A's
// are queued; the queue orders by the tenants' virtual token counters (wait-queue.ts), so B's
// requests are served ahead of A's queued ones, not behind all of them.
// What is asserted is the order in which requests got their first token (one slot: each starts
// only after the one before it ended), never a time or a ratio of times.
// Negative control: the same cluster with TESSERA_FAULT=no-tenant-fairness (the router's queue in
// arrival order) serves B only after every one of A's queued requests.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  allIdle,
  health,
  promptIds,
  startRouter,
  startWorker,
  useTestHome,
  waitUntil,
  type Router,
} from './support.js';

const home = useTestHome();
const KEY_A = 'sk-fair-queue-alice';
const KEY_B = 'sk-fair-queue-bob';
/** A's requests: one runs, the rest wait in the router's queue. */
const NUM_A = 8;

interface Cluster {
  readonly router: Router;
  readonly workers: { name: string; url: string }[];
  stop(): Promise<void>;
}

async function startCluster(name: string, env: Record<string, string>): Promise<Cluster> {
  const keys = join(home.dir, 'keys.json');
  await writeFile(keys, JSON.stringify({ [KEY_A]: 'alice', [KEY_B]: 'bob' }));
  const args = ['--context-length', '512'];
  const [prefill, decode] = await Promise.all([
    startWorker(`${name}-prefill`, 'prefill', args, home.dir, env),
    startWorker(`${name}-decode`, 'decode', [...args, '--max-running-requests', '1'], home.dir, env),
  ]);
  const router = await startRouter(`${name}-router`, [prefill], [decode], ['--api-keys', keys], home.dir, env);
  return {
    router,
    workers: [prefill, decode],
    stop: async () => void (await Promise.all([router.stop(), prefill.stop(), decode.stop()])),
  };
}

/** The router's queue counters (/health with the admin key). */
async function queueOf(router: Router): Promise<{ waiting: number; waited: number; timedOut: number }> {
  return (await health(router.url)).body['queue'] as never;
}

/** One streaming completion; pushes `label` onto `order` at its first token. */
async function streamed(
  router: Router,
  key: string,
  label: string,
  prompt: number[],
  maxTokens: number,
  order: string[],
): Promise<void> {
  const stream = await router.client(key).completions.create({
    model: 'builtin:tiny',
    prompt,
    max_tokens: maxTokens,
    stream: true,
    ignore_eos: true,
  } as never);
  let first = true;
  for await (const chunk of stream as unknown as AsyncIterable<{ choices: { text: string }[] }>) {
    if (first && (chunk.choices[0]?.text ?? '') !== '') {
      first = false;
      order.push(label);
    }
  }
  if (first) order.push(label); // no text at all: still in its place
}

/**
 * A floods (NUM_A prompts of 200 tokens, 64 output tokens each); once all of A's but the
 * running one have waited, B sends two short requests. The order of first tokens, and how many
 * of A's requests started after B's last one.
 */
async function floodThenB(router: Router): Promise<{ order: string[]; aAfterLastB: number }> {
  const order: string[] = [];
  const waited0 = (await queueOf(router)).waited;
  const a = Array.from({ length: NUM_A }, (_, i) =>
    streamed(router, KEY_A, `A${i + 1}`, promptIds(200, 5000 + i * 13), 64, order),
  );
  await waitUntil("A's flood to fill the cluster and wait in the router's queue", async () => {
    return (await queueOf(router)).waited - waited0 >= NUM_A - 1;
  });
  const b = [1, 2].map((i) => streamed(router, KEY_B, `B${i}`, promptIds(16, 900 + i), 4, order));
  await waitUntil("B's requests to wait in the router's queue", async () => {
    return (await queueOf(router)).waited - waited0 >= NUM_A + 1;
  });
  await Promise.all([...a, ...b]);
  const lastB = Math.max(order.indexOf('B1'), order.indexOf('B2'));
  return { order, aAfterLastB: order.slice(lastB + 1).filter((l) => l.startsWith('A')).length };
}

describe("the router's wait queue is fair between tenants", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster('fair', {});
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it("serves another tenant's requests ahead of a flood's queued ones", async () => {
    const { order, aAfterLastB } = await floodThenB(cluster.router);
    process.stdout.write(`fair queue: first tokens in the order ${order.join(' ')}\n`);
    expect(order).toHaveLength(NUM_A + 2);
    // One slot, A's 8 queued before B: in arrival order B would come after every A.
    expect(aAfterLastB).toBeGreaterThanOrEqual(2);
    expect(await queueOf(cluster.router)).toMatchObject({ waiting: 0, timedOut: 0 });
    await allIdle(cluster.workers);
  });
});

describe('negative control: the same cluster with no-tenant-fairness', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster('fcfs', { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'no-tenant-fairness' });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it("serves the other tenant only after every one of the flood's queued requests", async () => {
    const { order, aAfterLastB } = await floodThenB(cluster.router);
    process.stdout.write(`negative control: first tokens in the order ${order.join(' ')}\n`);
    expect(aAfterLastB).toBe(0);
  });
});
