// 2,500 fuzzed HTTP requests against `tessera up` (../support/fuzz.ts): no 5xx, every body in
// OpenAI's shape, no worker connection killed (decode saw no malformed frame, the router lost
// no connection), and afterwards every page on both workers free or cached.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzHttp } from '../support/fuzz.js';
import { allIdle, detail, spawnTessera, useTestHome, type Proc } from './support.js';

const home = useTestHome();
let cluster: Proc;
let routerUrl: string;
let workers: { name: string; url: string }[];

beforeAll(async () => {
  cluster = spawnTessera('up', ['up', '--port', '0', '--context-length', '512', '--decode-kv-pages', '96'], home.dir);
  routerUrl = (await cluster.waitFor(/router +http: (http:\/\/[\d.]+:\d+)/))[1] as string;
  await cluster.waitFor(/listening on/);
  workers = ['prefill-1', 'decode-1'].map((name) => ({
    name,
    url: new RegExp(`${name} +http: (http://[\\d.]+:\\d+)`).exec(cluster.stdout())?.[1] as string,
  }));
});
afterAll(async () => {
  await cluster?.stop();
});

describe('tessera up under 2,500 fuzzed requests', () => {
  it("answers every one in OpenAI's shape, none with a 5xx, kills no worker connection and leaks no page", async () => {
    const report = await fuzzHttp(routerUrl, { count: 2500, seed: 2017, concurrency: 8 });
    process.stdout.write(`fuzz up: ${JSON.stringify(report.byStatus)}\n`);
    expect(report.bad.slice(0, 10)).toEqual([]);
    expect(report.byStatus['200']).toBeGreaterThan(50);
    await allIdle(workers, 60_000);
    const decode = await detail(workers[1] as { url: string });
    expect(decode.transport).toMatchObject({ malformed: 0 });
    const router = (await detail({ url: routerUrl })) as Record<string, unknown>;
    // Only aborts (a stop string ends a stream, the rest is aborted through the protocol): no failed transfer.
    expect(
      Object.keys((router['stats'] as { failuresByCode: Record<string, number> }).failuresByCode).filter(
        (code) => code !== 'aborted',
      ),
    ).toEqual([]);
    expect(router['transport']).toMatchObject({ malformed: 0 });
    expect(cluster.stderr()).not.toMatch(/MaxListenersExceededWarning/);
  });
});
