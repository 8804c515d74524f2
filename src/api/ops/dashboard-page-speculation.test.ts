// The dashboard page draws a speculating node's speculation panel: drafter, drafted, accepted,
// acceptance, rolled back and a draft model's pool, in headless Chromium (puppeteer-core) over a
// fake back end; a node that does not speculate draws none.
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodePageMap, SpeculationView } from '../../core/index.js';
import { startTestServer, type TestServer } from '../testing/harness.js';

const ADMIN = 'admin-key-0123456789abcdef';
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SPEC: SpeculationView = {
  drafter: 'model',
  drafted: 200,
  accepted: 150,
  rolledBack: 50,
  draftPool: { pagesHeld: 3, numPages: 96, paused: false },
};
const map = (speculation?: SpeculationView): NodePageMap => ({
  kind: 'node',
  role: 'colocated',
  node: 'colocated',
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
  ...(speculation === undefined ? {} : { speculation }),
});

let browser: Browser;
const servers: TestServer[] = [];
beforeAll(async () => {
  for (const speculation of [SPEC, undefined]) {
    const t = await startTestServer({ dashboard: { adminKey: ADMIN, plan: [] } });
    t.backend.pageMap = async () => map(speculation);
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

/** The speculation panel's title and rows (null: no panel). */
async function specPanel(url: string): Promise<{ title: string; rows: string[][] } | null> {
  const page = await browser.newPage();
  try {
    await page.goto(`${url}/dashboard?key=${ADMIN}`);
    await page.waitForFunction('Number(document.body.dataset.updates || "0") >= 1');
    const panel = await page.$('[data-panel="speculation"]');
    if (panel === null) return null;
    return await panel.evaluate((el) => ({
      title: el.firstElementChild?.textContent ?? '',
      rows: [...el.querySelectorAll('tr')].map((tr) => [...tr.children].map((c) => c.textContent ?? '')),
    }));
  } finally {
    await page.close();
  }
}

describe("the dashboard's speculation panel", () => {
  it('draws the drafts, the acceptance, the rollbacks and the draft pool', async () => {
    const got = await specPanel((servers[0] as TestServer).url);
    expect(got?.title).toMatch(/speculation \(draft model\)/);
    expect(got?.rows.slice(1)).toEqual([
      ['drafted', '200'],
      ['accepted', '150'],
      ['acceptance', '75%'],
      ['acceptance, last interval', '-'],
      ['rolled back', '50'],
      ['draft pool pages', '3 / 96'],
    ]);
  });

  it('draws none for a node that does not speculate', async () => {
    expect(await specPanel((servers[1] as TestServer).url)).toBeNull();
  });
});
