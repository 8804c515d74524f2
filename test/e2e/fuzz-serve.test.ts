// 2,500 fuzzed HTTP requests against `tessera serve` (support/fuzz.ts): no 5xx, every body in
// OpenAI's shape (JSON errors for framing too), and afterwards every page free or cached.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzHttp } from './support/fuzz.js';
import { kvPages, startServer, useTestHome, waitUntil, type Server } from './support/process.js';

const home = useTestHome();
let server: Server;

beforeAll(async () => {
  server = await startServer(['--context-length', '512'], home.dir);
});
afterAll(async () => {
  await server?.stop();
});

describe('tessera serve under 2,500 fuzzed requests', () => {
  it("answers every one in OpenAI's shape, none with a 5xx, and leaks no page", async () => {
    const report = await fuzzHttp(server.url, { count: 2500, seed: 1717, concurrency: 8 });
    process.stdout.write(`fuzz serve: ${JSON.stringify(report.byStatus)}\n`);
    expect(report.bad.slice(0, 10)).toEqual([]);
    expect(report.byStatus['200']).toBeGreaterThan(50); // not vacuous: real generations ran
    await waitUntil('every page free or cached', async () => (await kvPages(server.url)).allocated === 0);
    expect(server.stderr()).not.toMatch(/MaxListenersExceededWarning|failed:/);
  });
});
