// Fair sharing between tenants on a cluster (issue 33): a real router, prefill and decode
// (separate processes), API keys checked by the router. The decode worker runs one request at a time
// (--max-running-requests 1), so while tenant A's flood of long prompts holds it, every other
// request waits in the router's WaitQueue. Tenant B's short requests arrive after all of A's
// are queued; the queue orders by the tenants' virtual token counters (wait-queue.ts), so B's
// requests are served ahead of A's queued ones, not behind all of them.
// What is asserted is the order in which requests got their first token (one slot: each starts
// only after the one before it ended), never a time or a ratio of times.
// Per-key limits through the router: a third key (carol, 1 request per minute) gets a 429 in
// OpenAI's rate_limit_error shape with Retry-After for its second request (the official client's
// RateLimitError), counted in the router's admin-only /metrics.
// Negative control: the same cluster with TESSERA_FAULT=no-tenant-fairness,skip-key-limits (the
// router's queue in arrival order; no per-key limits) serves B only after every one of A's queued
// requests, and carol's second request.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY } from '../support/process.js';
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
const KEY_C = 'sk-fair-queue-carol';
/** A's requests: one runs, the rest wait in the router's queue. */
const NUM_A = 8;

interface Cluster {
  readonly router: Router;
  readonly workers: { name: string; url: string }[];
  stop(): Promise<void>;
}

async function startCluster(name: string, env: Record<string, string>): Promise<Cluster> {
  const keys = join(home.dir, 'keys.json');
  await writeFile(
    keys,
    JSON.stringify({ [KEY_A]: 'alice', [KEY_B]: 'bob', [KEY_C]: { tenant: 'carol', requests_per_minute: 1 } }),
  );
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

/** Carol's two requests in a row: the second one's answer (status, Retry-After, body) and what the official client makes of it. */
async function carolTwice(
  router: Router,
): Promise<{ status: number; retryAfter: number; body: unknown; error: unknown }> {
  const carol = router.client(KEY_C);
  await carol.completions.create({ model: 'builtin:tiny', prompt: promptIds(8, 77), max_tokens: 2 });
  const r = await fetch(`${router.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY_C}` },
    body: JSON.stringify({ model: 'builtin:tiny', prompt: promptIds(8, 78), max_tokens: 2, stream: true }),
  });
  const body: unknown = await r.json().catch(() => 'not JSON');
  const error = await carol.completions.create({ model: 'builtin:tiny', prompt: promptIds(8, 79), max_tokens: 2 }).then(
    () => 'served',
    (e: unknown) => e,
  );
  return { status: r.status, retryAfter: Number(r.headers.get('retry-after')), body, error };
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

  it('answers a key past its requests per minute 429 rate_limit_error with Retry-After, counted per tenant', async () => {
    const { status, retryAfter, body, error } = await carolTwice(cluster.router);
    expect(status).toBe(429);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(body).toMatchObject({
      error: {
        type: 'rate_limit_error',
        code: 'rate_limit_exceeded',
        message: expect.stringMatching(/1 requests per minute/),
      },
    });
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const metrics = await (
      await fetch(`${cluster.router.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
    ).text();
    expect(metrics).toContain('tessera_tenant_rate_limited_total{tenant="carol",limit="requests_per_minute"} 2');
  });
});

describe('negative control: the same cluster with no-tenant-fairness and skip-key-limits', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster('fcfs', {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'no-tenant-fairness,skip-key-limits',
    });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it("serves the other tenant only after every one of the flood's queued requests", async () => {
    const { order, aAfterLastB } = await floodThenB(cluster.router);
    process.stdout.write(`negative control: first tokens in the order ${order.join(' ')}\n`);
    expect(aAfterLastB).toBe(0);
  });

  it("serves carol's second request in the minute", async () => {
    const { status, error } = await carolTwice(cluster.router);
    expect([status, error]).toEqual([200, 'served']);
  });
});
