// The operator's dashboard, seen through a real browser (Debian's headless Chromium driven by
// puppeteer-core) against a running `tessera up` with an admin key and three tenants:
//   - without the admin key the router's and the workers' /dashboard answer 401 (an API key too);
//   - the router's page shows every worker it knows, one cell per page of each;
//   - while requests run, each node's counts on screen equal its own /metrics tessera_kv_pages;
//   - once they end, every page on screen is free or cached again; the console has no errors.
// The Grafana board (deploy/grafana/) is checked against the same cluster: every metric its
// queries name is one that some node's /metrics exposes.
// DASHBOARD_SCREENSHOT=docs/dashboard.png saves a screenshot under load (for docs/dashboard.md).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startServer, writeJson, type Server } from '../support/process.js';
import { kvPages, spawnTessera, useTestHome, type Proc } from './support.js';

const ADMIN = 'e2e-admin-key-0123456789abcdef';
const KEYS = { 'key-acme': 'acme', 'key-globex': 'globex', 'key-initech': 'initech' } as const;
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
type Counts = { free: number; allocated: number; cached: number; quarantined: number };

const home = useTestHome();
let cluster: Proc;
let routerUrl: string;
let workers: { readonly name: string; readonly role: string; readonly url: string; readonly address: string }[];
let servers: Server[] = [];
let browser: Browser;
let page: Page;
const consoleErrors: string[] = [];

beforeAll(async () => {
  const keys = await writeJson(home.dir, 'keys.json', KEYS);
  // The held phase below freezes the prefill (SIGSTOP) for longer than the router's down-detection
  // (3 timed-out /health polls, ~6-9 s; each redraw also waits out the frozen prefill's 2 s
  // /dashboard/state timeout): `ignore-host-loss` keeps its connection open once it is marked down,
  // so the held requests wait for it instead of failing (ARCHITECTURE's invariant 15 is tested in
  // test/e2e/pd/stall.test.ts and test/e2e/cluster/host-loss.test.ts, not here).
  const hold = { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'ignore-host-loss' };
  cluster = spawnTessera(
    'up',
    [
      'up',
      '--port',
      '0',
      '--decode',
      '2',
      '--context-length',
      '512',
      '--prefill-kv-pages',
      '128',
      '--decode-kv-pages',
      '256',
      '--api-keys',
      keys,
    ],
    home.dir,
    { TESSERA_ADMIN_KEY: ADMIN, ...hold },
  );
  // Two co-located `tessera serve`: one without an admin key (no dashboard), one with.
  const colocated = ['--context-length', '256', '--kv-pages', '32'];
  [routerUrl, ...servers] = await Promise.all([
    cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/).then((m) => m[1] as string),
    startServer(colocated, home.dir, { TESSERA_ADMIN_KEY: '' }),
    startServer(colocated, home.dir, { TESSERA_ADMIN_KEY: ADMIN }),
  ]);
  workers = [...cluster.stdout().matchAll(/tessera up: ((?:prefill|decode)-\d+)\s+http: (\S+)\s+cluster: (\S+)/g)].map(
    (m) => ({
      name: m[1] as string,
      role: (m[1] as string).split('-')[0] as string,
      url: m[2] as string,
      address: m[3] as string,
    }),
  );
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900, deviceScaleFactor: 1 });
  page.on('console', (m) => void (m.type() === 'error' && consoleErrors.push(m.text())));
  page.on('pageerror', (e) => void consoleErrors.push(String(e)));
}, 150_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all([cluster?.stop(), ...servers.map((x) => x.stop())]);
});

const client = (key: keyof typeof KEYS) =>
  new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: key, maxRetries: 0, timeout: 120_000 });

/** The counts a node's card shows (what the page drew, read from its cells). */
async function onScreen(address: string): Promise<Counts & { cells: number }> {
  return page.$eval(`section[data-node="${address}"]`, (card) => {
    const n = (s: string): number => card.querySelectorAll(`.grid .cell.s-${s}`).length;
    return {
      cells: card.querySelectorAll('.grid .cell').length,
      free: n('f'),
      allocated: n('a'),
      cached: n('c'),
      quarantined: n('q'),
    };
  });
}

/** Resolves after the page has drawn `count` more polls. */
async function nextUpdates(count: number): Promise<void> {
  const now = Number(await page.$eval('body', (b) => b.dataset['updates'] ?? '0'));
  await page.waitForFunction(`Number(document.body.dataset.updates ?? '0') >= ${now + count}`, { timeout: 10_000 });
}

const same = (a: Counts, b: Counts): boolean =>
  a.free === b.free && a.allocated === b.allocated && a.cached === b.cached && a.quarantined === b.quarantined;

describe('the dashboard of `tessera serve`', () => {
  it('does not exist without an admin key (404), is 401 without the key, and maps the pool with it', async () => {
    const [off, on] = servers as [Server, Server];
    for (const path of ['/dashboard', '/dashboard/state']) {
      expect((await fetch(`${off.url}${path}`)).status).toBe(404);
      expect(
        (await fetch(`${off.url}${path}?key=${ADMIN}`, { headers: { authorization: `Bearer ${ADMIN}` } })).status,
      ).toBe(404);
      expect((await fetch(`${on.url}${path}`)).status).toBe(401);
    }
    const view = (await (
      await fetch(`${on.url}/dashboard/state`, { headers: { authorization: `Bearer ${ADMIN}` } })
    ).json()) as { map: { kind: string; role: string; numPages: number; states: string }; plan: string[] };
    expect(view.map).toMatchObject({ kind: 'node', role: 'colocated', numPages: 32, states: 'f'.repeat(32) });
    expect(view.plan.some((line) => /^pool\s+32 pages/.test(line))).toBe(true);
    const tab = await browser.newPage();
    tab.on('console', (m) => void (m.type() === 'error' && consoleErrors.push(m.text())));
    await tab.goto(`${on.url}/dashboard?key=${ADMIN}`);
    await tab.waitForSelector('section[data-node="colocated"] .grid .cell');
    expect(await tab.$$eval('section[data-node="colocated"] .grid .cell', (cells) => cells.length)).toBe(32);
    await tab.close();
  });
});

describe('the dashboard of `tessera up`', () => {
  it('is closed without the admin key: 401 on the router and on every worker, also for an API key', async () => {
    expect(workers.map((w) => w.name).sort()).toEqual(['decode-1', 'decode-2', 'prefill-1']);
    for (const url of [routerUrl, ...workers.map((w) => w.url)]) {
      for (const path of ['/dashboard', '/dashboard/state']) {
        expect((await fetch(`${url}${path}`)).status).toBe(401);
        expect((await fetch(`${url}${path}`, { headers: { authorization: 'Bearer key-acme' } })).status).toBe(401);
      }
    }
  });

  it('shows one cell per page of every node, its counts equal /metrics while requests run, and the pages come back when they end', async () => {
    await page.goto(`${routerUrl}/dashboard?key=${ADMIN}`);
    for (const w of workers)
      await page.waitForSelector(`section[data-node="${w.address}"] .grid .cell`, { timeout: 15_000 });
    for (const w of workers) {
      const body = (await (await fetch(`${w.url}/health`)).json()) as { kvPages: number };
      expect((await onScreen(w.address)).cells).toBe(body.kvPages);
    }

    // A refused request appears under the failures by code, and in the last failures since the page opened.
    const refused = await fetch(`${routerUrl}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer key-globex' },
      body: JSON.stringify({ model: 'builtin:tiny', prompt: 'hi', max_tokens: 100_000 }),
    });
    expect(refused.status).toBe(400);
    await page.waitForFunction(
      '[...document.querySelectorAll(\'section[data-node="router"] .panel\')].filter((p) => /context_length_exceeded/.test(p.textContent)).length === 2',
      { timeout: 10_000 },
    );

    // Load: three tenants, long outputs, streamed.
    const tenants = Object.keys(KEYS) as (keyof typeof KEYS)[];
    let running = 0;
    /** Requests whose first token arrived: their prompts are prefilled. */
    let streaming = 0;
    const generate = async (i: number): Promise<void> => {
      running++;
      try {
        const body = {
          model: 'builtin:tiny',
          prompt: `Request ${i}: ${'the pages of the pool '.repeat(4 + (i % 9) * 2)}`,
          max_tokens: 300,
          stream: true,
          ignore_eos: true,
        };
        const stream = (await client(tenants[i % 3] as keyof typeof KEYS).completions.create(
          body as never,
        )) as unknown as AsyncIterable<unknown>;
        let first = true;
        for await (const _chunk of stream) {
          if (first) streaming++;
          first = false;
        }
      } finally {
        running--;
      }
    };
    /** One sample per node: /metrics held still across two redraws (the second fetched after it) and the screen agreed. */
    const matchOnce = async (w: (typeof workers)[number]): Promise<Counts | undefined> => {
      const before = await kvPages(w.url);
      await nextUpdates(2);
      const screen = await onScreen(w.address);
      const after = await kvPages(w.url);
      return running > 0 && same(before, after) && same(screen, after) ? after : undefined;
    };
    const matched = new Map<string, Counts>();
    const load: Promise<void>[] = Array.from({ length: 9 }, (_, i) => generate(i));
    const target = process.env['DASHBOARD_SCREENSHOT'];
    // A page that changes owner flashes; hovering a page shows its epoch.
    await page.waitForSelector('.grid .cell.flash', { timeout: 10_000 });
    await page.hover(
      `section[data-node="${workers.find((w) => w.role === 'decode')?.address}"] .grid .cell[data-page="0"]`,
    );
    expect(await page.$eval('#tip', (t) => t.textContent ?? '')).toMatch(/page 0.*epoch \d+/);
    // While they decode, the decodes' pages move as requests start and end, and the prefill's hold
    // still once every prompt is prefilled (each request has its first token): the prefill is
    // compared in that state, for as long as the load runs; a decode is compared here if its pages
    // hold still for a moment, and in any case in the held state below.
    // A fresh wave for the comparison, so it does not depend on how long the steps above took on a
    // busy machine: the first wave has done its part (the flash); its end and the new wave's start
    // are the last changes to the prefill's pages before the new wave's prompts are all prefilled.
    await Promise.all(load);
    streaming = 0;
    // Twice the requests: decode steps twice as long, so the still state lasts for several redraws
    // even on a machine busy enough to slow the page's redraws down.
    load.push(...Array.from({ length: 18 }, (_, i) => generate(9 + i)));
    while (streaming < 18 && running > 0) await new Promise((r) => setTimeout(r, 20));
    for (let round = 0; running > 0 && workers.some((w) => !matched.has(w.address)); round++) {
      if (target !== undefined && round === 3) {
        await page.mouse.move(1, 1);
        await page.evaluate('window.scrollTo(0, 0)');
        await page.screenshot({ path: join(ROOT, target), fullPage: true });
      }
      const unmatched = workers.filter((x) => !matched.has(x.address));
      // The prefill first: its still state lasts only while the load runs.
      for (const w of [
        ...unmatched.filter((x) => x.role === 'prefill'),
        ...unmatched.filter((x) => x.role !== 'prefill'),
      ]) {
        const counts = await matchOnce(w);
        if (counts !== undefined) matched.set(w.address, counts);
      }
    }
    // The prefill is compared while requests run (above); it is frozen below.
    expect(matched.has(workers.find((w) => w.role === 'prefill')?.address ?? '')).toBe(true);
    // Then requests that hold still by construction: the load has ended, the prefill is frozen
    // (SIGSTOP), and each decode keeps its reserved pages allocated while it waits for their KV, and
    // goes on answering /metrics and the router. Nothing else runs, so a decode's pages cannot move
    // until the prefill resumes: the comparison waits for that state instead of sampling a race.
    await Promise.all(load);
    const prefill = workers.find((w) => w.name === 'prefill-1');
    const prefillPid = Number(/prefill-1 .* pid (\d+)/.exec(cluster.stdout())?.[1]);
    expect(prefill).toBeDefined();
    expect(prefillPid).toBeGreaterThan(0);
    process.kill(prefillPid, 'SIGSTOP');
    let held: Promise<void>[] = [];
    try {
      held = Array.from({ length: 3 }, (_, i) => generate(20 + i));
      // The held requests are transfers in flight on screen: AwaitingKv on a decode, Prefilling on the router.
      await page.waitForFunction(
        "[...document.querySelectorAll('section[data-node] .panel td')].filter((td) => td.textContent === 'AwaitingKv').length >= 3",
        { timeout: 30_000 },
      );
      for (const w of workers.filter((x) => x.role === 'decode')) {
        for (let round = 0; round < 10 && !matched.has(w.address + '#held'); round++) {
          const counts = await matchOnce(w);
          if (counts !== undefined) matched.set(w.address + '#held', counts);
        }
      }
      await nextUpdates(2);
      expect(
        await page.$$eval(
          'section[data-node] .panel td',
          (tds) => tds.filter((td) => td.textContent === 'AwaitingKv').length,
        ),
      ).toBeGreaterThanOrEqual(3);
      expect(
        await page.$$eval(
          'section[data-node="router"] td',
          (tds) => tds.filter((td) => td.textContent === 'Prefilling').length,
        ),
      ).toBeGreaterThanOrEqual(3);
    } finally {
      process.kill(prefillPid, 'SIGCONT');
    }
    await Promise.all(held);
    for (const w of workers) expect(matched.has(w.address) || matched.has(w.address + '#held')).toBe(true);
    expect([...matched.values()].some((c) => c.allocated > 0)).toBe(true);

    // Ended: on screen every page of every node is free or cached again.
    await page.waitForFunction(
      "document.querySelectorAll('section[data-node] .grid .cell.s-a, section[data-node] .grid .cell.s-q').length === 0",
      { timeout: 20_000 },
    );
    for (const w of workers) {
      const screen = await onScreen(w.address);
      expect(screen.free + screen.cached).toBe(screen.cells);
      expect(same(screen, await kvPages(w.url))).toBe(true);
    }
    // The router's card lists every worker; the charts drew; nothing went to the console.
    const routerCard = await page.$eval('section[data-node="router"]', (c) => c.textContent ?? '');
    for (const w of workers) expect(routerCard).toContain(w.url);
    expect(
      await page.$$eval(
        '.chart svg path',
        (ps) => ps.filter((p) => (p.getAttribute('d') ?? '').startsWith('M')).length,
      ),
    ).toBeGreaterThan(0);
    expect(consoleErrors).toEqual([]);
  }, 90_000);
});

describe('the Grafana board', () => {
  it("queries only metrics that the cluster's /metrics expose", async () => {
    const board = JSON.parse(await readFile(join(ROOT, 'deploy', 'grafana', 'tessera-pd.json'), 'utf8')) as {
      panels: { type: string; targets?: { expr: string }[] }[];
    };
    const exprs = board.panels.filter((p) => p.type !== 'row').flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    expect(board.panels.filter((p) => p.type !== 'row').every((p) => (p.targets ?? []).length > 0)).toBe(true);
    const exposed = new Set<string>();
    for (const url of [routerUrl, ...workers.map((w) => w.url)]) {
      const text = await (await fetch(`${url}/metrics`)).text();
      for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
        const [name, type] = [m[1] as string, m[2] as string];
        exposed.add(name);
        if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exposed.add(name + suffix);
      }
      for (const m of text.matchAll(/^([a-zA-Z_:][\w:]*)[{ ]/gm)) exposed.add(m[1] as string);
    }
    const named = new Set(exprs.flatMap((e) => [...e.matchAll(/\btessera_[a-z0-9_]+/g)].map((m) => m[0])));
    expect(named.size).toBeGreaterThanOrEqual(10);
    expect([...named].filter((n) => !exposed.has(n))).toEqual([]);
    // The panels an operator of a PD cluster needs, by the metric behind each.
    for (const needed of [
      'tessera_time_to_first_token_seconds_bucket',
      'tessera_inter_token_latency_seconds_bucket',
      'tessera_kv_pages',
      'tessera_kv_transfer_bytes_total',
      'tessera_kv_transfer_seconds_bucket',
      'tessera_kv_transfer_checksum_failures_total',
      'tessera_kv_tag_mismatches_total',
      'tessera_aborts_total',
    ]) {
      expect(named).toContain(needed);
    }
  });
});
