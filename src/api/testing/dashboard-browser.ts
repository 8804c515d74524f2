// Test support: the dashboard page as headless Chromium (puppeteer-core) draws it, one test server
// over a fake back end per node map. Must never be imported by production code.
import puppeteer, { type Page } from 'puppeteer-core';
import type { NodePageMap } from '../../core/index.js';
import { startTestServer, type TestServer } from './harness.js';

const ADMIN = 'admin-key-0123456789abcdef';

/** A node's map of two pages of 16, the first held: the fields a panel's test does not look at. */
export function twoPageNode(fields: Partial<NodePageMap> & Pick<NodePageMap, 'role' | 'node'>): NodePageMap {
  return {
    kind: 'node',
    pageSize: 16,
    numPages: 2,
    states: 'af',
    epochs: [1, 0],
    holderOf: [0, null],
    holders: [{ tenant: 'acme', rid: 'r1' }],
    transfers: [],
    quarantined: [],
    running: 1,
    waiting: 0,
    loop: { numSteps: 0, numTokensSampled: 0, stepMsTotal: 0, numItemsStepped: 0 },
    totals: {},
    ...fields,
  };
}

export interface DashboardPages {
  /** `read` on the dashboard page of the node whose map is maps[i], after its first update; the page closed after. */
  read<T>(i: number, read: (page: Page) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** A dashboard server per map and a browser (`chromium`: its executable) to load their pages. */
export async function openDashboards(maps: readonly NodePageMap[], chromium: string): Promise<DashboardPages> {
  const servers: TestServer[] = [];
  for (const map of maps) {
    const t = await startTestServer({ dashboard: { adminKey: ADMIN, plan: [] } });
    t.backend.pageMap = async () => map;
    servers.push(t);
  }
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  return {
    async read(i, read) {
      const page = await browser.newPage();
      try {
        await page.goto(`${(servers[i] as TestServer).url}/dashboard?key=${ADMIN}`);
        await page.waitForFunction('Number(document.body.dataset.updates || "0") >= 1');
        return await read(page);
      } finally {
        await page.close();
      }
    },
    async close() {
      await browser.close();
      await Promise.all(servers.map((s) => s.close()));
    },
  };
}
