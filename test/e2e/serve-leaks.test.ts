// No leaked pages: a burst of requests on a small pool (so some wait and some are preempted),
// streamed and not, with clients that disconnect at random points — before the answer, after a
// few chunks, mid-prefill. Once idle every page is free or cached, the worker checked ledger
// integrity after every step (TESSERA_CHECK_EVERY_STEP=1), and the next request succeeds.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/index.js';
import {
  health,
  kvPages,
  promptIds,
  scrape,
  startServer,
  useTestHome,
  waitUntil,
  type Server,
} from './support/process.js';

const home = useTestHome();
let server: Server;
const NUM_PAGES = 40;

beforeAll(async () => {
  server = await startServer(
    [
      '--context-length',
      '320',
      '--kv-pages',
      String(NUM_PAGES),
      '--max-running-requests',
      '8',
      '--chunked-prefill-size',
      '64',
    ],
    home.dir,
    { TESSERA_CHECK_EVERY_STEP: '1' },
  );
});
afterAll(async () => {
  await server?.stop();
});

type Fate = 'finished' | 'aborted' | 'failed';

/** One request that may be cut off: before any byte (abortAfterMs), or after `abortAfterChunks` chunks. */
async function oneRequest(client: OpenAI, rng: Rng, i: number): Promise<Fate> {
  const stream = rng.chance(0.7);
  const body = {
    model: 'builtin:tiny',
    prompt: promptIds(rng.chance(0.3) ? 100 + rng.int(150) : 5 + rng.int(40), 20000 + 300 * (i % 7)),
    max_tokens: 10 + rng.int(60),
    temperature: rng.chance(0.5) ? 0 : 1,
    seed: i,
    ignore_eos: true,
  };
  const controller = new AbortController();
  const cut = rng.int(3); // 0: never, 1: after a delay, 2: after some chunks
  if (cut === 1) setTimeout(() => controller.abort(), 1 + rng.int(150));
  const abortAfterChunks = cut === 2 ? 1 + rng.int(8) : Infinity;
  try {
    if (!stream) {
      await client.completions.create(body as never, { signal: controller.signal });
      return 'finished';
    }
    let n = 0;
    for await (const _ of (await client.completions.create({ ...body, stream: true } as never, {
      signal: controller.signal,
    })) as unknown as AsyncIterable<unknown>) {
      if (++n >= abortAfterChunks) controller.abort();
    }
    return 'finished';
  } catch (error) {
    if (error instanceof OpenAI.APIUserAbortError || controller.signal.aborted) return 'aborted';
    if (error instanceof OpenAI.APIError && error.status === 503) return 'failed'; // overloaded is an honest answer
    throw error;
  }
}

describe('a burst with random client disconnects', () => {
  it('leaves every page free or cached once idle, with integrity checked after every step', async () => {
    const rng = new Rng(7);
    const client = server.client();
    const fates = await Promise.all(
      Array.from({ length: 40 }, (_, i) => oneRequest(client, new Rng(rng.nextU32()), i)),
    );
    expect(fates.filter((f) => f === 'aborted').length).toBeGreaterThan(5);
    expect(fates.filter((f) => f === 'finished').length).toBeGreaterThan(5);

    await waitUntil('the server to be idle', async () => (await health(server.url)).body['idle'] === true);
    const pages = await kvPages(server.url);
    expect(pages).toMatchObject({ allocated: 0, quarantined: 0 });
    expect(pages.free + pages.cached).toBe(NUM_PAGES);

    const report = await health(server.url);
    expect(report.status).toBe(200);
    expect(report.body['checkEveryStep']).toBe(true);
    expect(report.body['steps']).toBeGreaterThan(50);
    expect(report.body['integrityChecksAfterStep']).toBe(report.body['steps']);

    const metrics = await scrape(server.url);
    expect(metrics.get('tessera_kv_tag_mismatches_total')).toBe(0);
    expect(metrics.get('tessera_requests_running')).toBe(0);
    expect(metrics.get('tessera_requests_waiting')).toBe(0);
    expect(metrics.get('tessera_requests_total{outcome="aborted"}')).toBeGreaterThan(0);

    const next = await client.completions.create({ model: 'builtin:tiny', prompt: 'still here', max_tokens: 4 });
    expect(next.choices[0]?.finish_reason).toBeDefined();
  });
});
