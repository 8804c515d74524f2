// The dashboard page draws a speculating node's speculation panel: drafter, drafted, accepted,
// acceptance, rolled back and a draft model's pool, in headless Chromium (puppeteer-core) over a
// fake back end; a node that does not speculate draws none.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodePageMap, SpeculationView } from '../../core/index.js';
import { openDashboards, twoPageNode, type DashboardPages } from '../testing/dashboard-browser.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SPEC: SpeculationView = {
  drafter: 'model',
  drafted: 200,
  accepted: 150,
  rolledBack: 50,
  draftPool: { pagesHeld: 3, numPages: 96, paused: false },
};
const map = (speculation?: SpeculationView): NodePageMap =>
  twoPageNode({ role: 'colocated', node: 'colocated', ...(speculation === undefined ? {} : { speculation }) });

let pages: DashboardPages;
beforeAll(async () => {
  pages = await openDashboards([map(SPEC), map()], CHROMIUM);
}, 60_000);
afterAll(async () => {
  await pages?.close();
});

/** Node i's speculation panel: its title and rows (null: no panel). */
function specPanel(i: number): Promise<{ title: string; rows: string[][] } | null> {
  return pages.read(i, async (page) => {
    const panel = await page.$('[data-panel="speculation"]');
    if (panel === null) return null;
    return await panel.evaluate((el) => ({
      title: el.firstElementChild?.textContent ?? '',
      rows: [...el.querySelectorAll('tr')].map((tr) => [...tr.children].map((c) => c.textContent ?? '')),
    }));
  });
}

describe("the dashboard's speculation panel", () => {
  it('draws the drafts, the acceptance, the rollbacks and the draft pool', async () => {
    const got = await specPanel(0);
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
    expect(await specPanel(1)).toBeNull();
  });
});
