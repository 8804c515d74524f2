// The dashboard page draws a node's cache tiers: one row per tier the node's map has (pool, disk,
// peer), with its pages, hits, misses and refused loads by reason, in headless Chromium
// (puppeteer-core) over a fake back end; a node without tiers (a decode) draws no tier table.
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodePageMap, TierView } from '../../core/index.js';
import { startTestServer, type TestServer } from '../testing/harness.js';

const ADMIN = 'admin-key-0123456789abcdef';
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const TIERS: TierView[] = [
  { name: 'pool', pages: 12, hits: 30, misses: 9, refused: {} },
  { name: 'disk', pages: 240, hits: 6, misses: 3, refused: { namespace: 0, checksum: 2, length: 1 } },
  { name: 'peer', pages: 4, hits: 4, misses: 1, refused: { epoch: 1 } },
];
const map = (tiers?: TierView[]): NodePageMap => ({
  kind: 'node',
  role: tiers === undefined ? 'decode' : 'prefill',
  node: tiers === undefined ? '10.0.0.2:7001' : '10.0.0.1:7001',
  pageSize: 16,
  numPages: 2,
  states: 'cf',
  epochs: [1, 0],
  holderOf: [0, null],
  holders: [{ tenant: 'acme', rid: null }],
  transfers: [],
  quarantined: [],
  running: 0,
  waiting: 0,
  loop: { numSteps: 0, numTokensSampled: 0, stepMsTotal: 0, numItemsStepped: 0 },
  totals: {},
  ...(tiers === undefined ? {} : { tiers }),
});

let browser: Browser;
const servers: TestServer[] = [];
beforeAll(async () => {
  for (const tiers of [TIERS, undefined]) {
    const t = await startTestServer({ dashboard: { adminKey: ADMIN, plan: [] } });
    t.backend.pageMap = async () => map(tiers);
    servers.push(t);
  }
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all(servers.map((s) => s.close()));
});

/** The rows of the tier table the page drew for its node (null: no tier table). */
async function tierRows(url: string): Promise<string[][] | null> {
  const page = await browser.newPage();
  try {
    await page.goto(`${url}/dashboard?key=${ADMIN}`);
    await page.waitForFunction('Number(document.body.dataset.updates || "0") >= 1');
    if ((await page.$('[data-panel="tiers"]')) === null) return null;
    return await page.$$eval('[data-panel="tiers"] tr', (rows) =>
      rows.map((tr) => [...tr.children].map((c) => c.textContent ?? '')),
    );
  } finally {
    await page.close();
  }
}

describe("the dashboard's cache tiers", () => {
  it('draw one row per tier: pages, hits, misses, refused loads by reason', async () => {
    expect(await tierRows((servers[0] as TestServer).url)).toEqual([
      ['tier', 'pages', 'hits', 'misses', 'refused'],
      ['pool', '12', '30', '9', '0'],
      ['disk', '240', '6', '3', 'checksum 2, length 1'],
      ['peer', '4', '4', '1', 'epoch 1'],
    ]);
  });

  it('draw no tier table for a node that keeps none', async () => {
    expect(await tierRows((servers[1] as TestServer).url)).toBeNull();
  });
});
