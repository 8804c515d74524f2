// The dashboard page draws a node's cache tiers: one row per tier the node's map has (pool, disk,
// peer), with its pages, hits, misses and refused loads by reason, in headless Chromium
// (puppeteer-core) over a fake back end; a node without tiers (a decode) draws no tier table.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodePageMap, TierView } from '../../core/index.js';
import { openDashboards, twoPageNode, type DashboardPages } from '../testing/dashboard-browser.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const TIERS: TierView[] = [
  { name: 'pool', pages: 12, hits: 30, misses: 9, refused: {} },
  { name: 'disk', pages: 240, hits: 6, misses: 3, refused: { namespace: 0, checksum: 2, length: 1 } },
  { name: 'peer', pages: 4, hits: 4, misses: 1, refused: { epoch: 1 } },
];
const map = (tiers?: TierView[]): NodePageMap =>
  twoPageNode({
    role: tiers === undefined ? 'decode' : 'prefill',
    node: tiers === undefined ? '10.0.0.2:7001' : '10.0.0.1:7001',
    states: 'cf',
    holders: [{ tenant: 'acme', rid: null }],
    running: 0,
    ...(tiers === undefined ? {} : { tiers }),
  });

let pages: DashboardPages;
beforeAll(async () => {
  pages = await openDashboards([map(TIERS), map()], CHROMIUM);
}, 60_000);
afterAll(async () => {
  await pages?.close();
});

/** The rows of the tier table node i's page drew (null: no tier table). */
function tierRows(i: number): Promise<string[][] | null> {
  return pages.read(i, async (page) => {
    if ((await page.$('[data-panel="tiers"]')) === null) return null;
    return await page.$$eval('[data-panel="tiers"] tr', (rows) =>
      rows.map((tr) => [...tr.children].map((c) => c.textContent ?? '')),
    );
  });
}

describe("the dashboard's cache tiers", () => {
  it('draw one row per tier: pages, hits, misses, refused loads by reason', async () => {
    expect(await tierRows(0)).toEqual([
      ['tier', 'pages', 'hits', 'misses', 'refused'],
      ['pool', '12', '30', '9', '0'],
      ['disk', '240', '6', '3', 'checksum 2, length 1'],
      ['peer', '4', '4', '1', 'epoch 1'],
    ]);
  });

  it('draw no tier table for a node that keeps none', async () => {
    expect(await tierRows(1)).toBeNull();
  });
});
