// `tessera probe` against `tessera up --api-keys` as it ships (builtin:austen, default pools,
// tenant-scoped prefix cache, every defence on): exit 0, every check clean, the prefix-timing
// positive control significant (p < 0.01) and the cross-tenant test not (p > 0.05). Then the
// HTML report in headless Chromium (Debian's `chromium`, driven by puppeteer-core): no console
// errors, no external requests, and every plot drawn. PROBE_SCREENSHOT=docs/probe-report.png
// saves the screenshot docs/probe.md shows.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probe, resultOf, startCluster, type Cluster, type ProbeRun } from './support.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
let cluster: Cluster;
let run: ProbeRun;
beforeAll(async () => {
  cluster = await startCluster('up-clean');
});
afterAll(async () => cluster?.stop());

describe('tessera probe against tessera up --api-keys as shipped', () => {
  it(
    'exits 0 with every check clean; the positive control sees the cache, the cross-tenant ' + 'test does not',
    async () => {
      run = await probe(cluster, ['--budget', '32', '--seed', '11']);
      // With no leak the cross-tenant p-value is uniform on [0, 1]: one clean run in twenty lands at or
      // below 0.05 by chance (8 samples: P(D+ >= 5/8) = 0.044). Such a run is repeated once with another
      // seed, an independent sample; a real cross-tenant cache shows in both, chance in 1 run of 400.
      if (crossPValue(run) <= 0.05) run = await probe(cluster, ['--budget', '32', '--seed', '12']);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.report.results.map((r) => [r.check, r.status])).toEqual([
        ['error-honesty', 'clean'],
        ['canary', 'clean'],
        ['non-interference', 'clean'],
        ['prefix-timing', 'clean'],
      ]);
      const pt = resultOf(run.report, 'prefix-timing').figures as {
        control: { pValue: number; medianRatio: number };
        cross: { pValue: number };
        samples: number;
      };
      expect(pt.samples).toBe(8);
      expect(pt.control.pValue).toBeLessThan(0.01);
      expect(pt.control.medianRatio).toBeLessThan(0.8);
      expect(pt.cross.pValue).toBeGreaterThan(0.05);
      // Canary: A wrote its markers and B's outputs were searched; every over-limit request was refused.
      const canary = resultOf(run.report, 'canary').figures as {
        aServed: number;
        bOutputs: number;
        paths: { expect: string; status: number }[];
      };
      expect(canary.aServed).toBeGreaterThan(0);
      expect(canary.bOutputs).toBeGreaterThan(3);
      expect(canary.paths.filter((p) => p.expect === 'refuse').every((p) => p.status === 400)).toBe(true);
      // Self-consistency measured, and the answers are the server's own predictions.
      const consistency = resultOf(run.report, 'non-interference').figures['selfConsistency'] as {
        kind: string;
        agreement: number;
      };
      expect(consistency.kind).toBe('measured');
      expect(consistency.agreement).toBeGreaterThanOrEqual(0.8);
      // The table on stdout, a bar per check on stderr, every request in the JSON.
      expect(run.stdout).toMatch(
        /error-honesty +clean[\s\S]*canary +clean[\s\S]*non-interference +clean[\s\S]*prefix-timing +clean/,
      );
      expect(run.stdout).toMatch(/nothing found \(exit 0\)/);
      for (const check of ['error-honesty', 'canary', 'non-interference', 'prefix-timing'])
        expect(run.stderr).toMatch(new RegExp(`${check} +\\[#+\\] +\\d+/\\d+ clean`));
      expect(run.report.requests.length).toBe(
        run.report.results.reduce((n, r) => n + r.numRequests, 0) +
          run.report.requests.filter((r) => r.check === 'setup').length,
      );
      expect(run.report.requests.every((r) => r.body !== undefined && r.startMs >= 0)).toBe(true);
    },
    240_000,
  );

  it('writes an HTML report that renders in headless Chromium without console errors, plots drawn', async () => {
    const html = await readFile(run.htmlPath, 'utf8');
    expect(html).not.toMatch(/<script|<link|src=["']https?:|url\(/i); // self-contained: nothing to fetch
    const browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu'],
    });
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('console', (m) => void (m.type() === 'error' && problems.push(m.text())));
      page.on('pageerror', (e) => void problems.push(String(e)));
      page.on('requestfailed', (r) => void problems.push(`request failed: ${r.url()}`));
      const requested: string[] = [];
      page.on('request', (r) => void requested.push(r.url()));
      await page.setViewport({ width: 1240, height: 900 });
      await page.goto(`file://${run.htmlPath}`, { waitUntil: 'load' });
      // Evaluated in the page (a string: this project's TypeScript has no DOM types).
      const drawn = (await page.evaluate(`(() => {
        const box = (e) => e.getBBox();
        return {
          plots: document.querySelectorAll('svg.plot').length,
          ecdf: [...document.querySelectorAll('svg.plot[data-kind="ecdf"] path.series')].map((p) => ({ n: Number(p.getAttribute('data-n')), w: box(p).width, h: box(p).height })),
          bars: [...document.querySelectorAll('svg.plot rect.bar')].map((r) => box(r).height),
          sections: document.querySelectorAll('section.check').length,
        };
      })()`)) as { plots: number; ecdf: { n: number; w: number; h: number }[]; bars: number[]; sections: number };
      expect(problems).toEqual([]);
      expect(requested.every((u) => u.startsWith('file://'))).toBe(true);
      expect(drawn.sections).toBe(4);
      expect(drawn.plots).toBe(5);
      expect(drawn.ecdf).toHaveLength(4);
      for (const line of drawn.ecdf) {
        expect(line.n).toBe(8);
        expect(line.w).toBeGreaterThan(50);
        expect(line.h).toBeGreaterThan(20);
      }
      expect(drawn.bars.length).toBeGreaterThanOrEqual(9);
      expect(drawn.bars.every((h) => h >= 1)).toBe(true);
      const shot = process.env['PROBE_SCREENSHOT'] ?? join(cluster.dir, 'report.png');
      await page.screenshot({ path: shot as `${string}.png`, fullPage: true });
      const png = await readFile(shot);
      expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
      expect((await stat(shot)).size).toBeGreaterThan(20_000);
    } finally {
      await browser.close();
    }
  });
});

function crossPValue(r: ProbeRun): number {
  const figures = resultOf(r.report, 'prefix-timing').figures as { cross?: { pValue?: number } };
  return figures.cross?.pValue ?? 1;
}
