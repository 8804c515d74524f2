import { describe, expect, it } from 'vitest';
import { renderHtml } from './report-html.js';
import { progressLine, verdictTable } from './report-text.js';
import type { ProbeReport } from './types.js';

const report: ProbeReport = {
  tool: 'tessera probe',
  startedAt: '2026-12-01T00:00:00.000Z',
  baseUrl: 'http://127.0.0.1:8000',
  options: {
    baseUrl: 'http://127.0.0.1:8000',
    model: undefined,
    checks: ['canary', 'prefix-timing'],
    budget: 32,
    seed: 1,
    batchInvariant: false,
    extraBody: { A: {}, B: {} },
    requestTimeoutMs: 1000,
    sameKey: false,
  },
  server: {
    model: 'm<1>',
    contextLength: 512,
    contextSource: '/v1/models max_model_len',
    poolLimit: null,
    sameKey: false,
  },
  results: [
    {
      check: 'canary',
      status: 'finding',
      summary: 'B carries <script>alert(1)</script>',
      numRequests: 2,
      budgetRequests: 30,
      wallMs: 1500,
      findings: [{ what: 'marker "zapoleki" in B\'s output', requests: [2] }],
      figures: { n: 1 },
      plots: [
        {
          kind: 'bars',
          title: 'matches',
          unit: 'matches',
          bars: [
            { label: 'A', value: 3 },
            { label: 'decoy', value: 0 },
          ],
        },
      ],
    },
    {
      check: 'prefix-timing',
      status: 'inconclusive',
      summary: 'positive control not significant',
      numRequests: 1,
      budgetRequests: 33,
      wallMs: 900,
      findings: [],
      figures: {},
      plots: [
        {
          kind: 'ecdf',
          title: 'TTFT',
          unit: 'ms',
          series: [
            { name: 'fresh', values: [100, 120, 90] },
            { name: 'repeat', values: [20, 30] },
          ],
        },
      ],
    },
  ],
  exitCode: 1,
  requests: [
    {
      id: 1,
      check: 'setup',
      tenant: 'A',
      method: 'GET',
      path: '/v1/models',
      body: null,
      purpose: 'models',
      startMs: 0,
      status: 200,
    },
    {
      id: 2,
      check: 'canary',
      tenant: 'B',
      method: 'POST',
      path: '/v1/completions',
      body: { prompt: [1, 2] },
      purpose: 'x',
      startMs: 1,
      status: 200,
      texts: ['<b>'],
    },
  ],
};

describe('the probe reports', () => {
  it('the verdict table names each check, its verdict, requests and evidence, and the exit', () => {
    const table = verdictTable(report);
    expect(table).toMatch(/canary +FINDING +2\/30 +1\.5 s +B carries/);
    expect(table).toMatch(/prefix-timing +inconclusive +1\/33/);
    expect(table).toMatch(/findings:\n {2}canary: marker "zapoleki" in B's output \(requests 2\)/);
    expect(table).toMatch(/LEAK OR SIGNAL FOUND \(exit 1\)/);
    expect(progressLine('canary', 5, 10)).toBe('canary            [##########----------]   5/10');
  });

  it('the HTML is self-contained, escapes what the server sent, and draws one svg per plot', () => {
    const html = renderHtml(report);
    expect(html).not.toMatch(/<script|<link|src=|url\(/i);
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain('m&lt;1&gt;');
    expect(html.match(/<svg class="plot"/g)).toHaveLength(2);
    expect(html.match(/<path class="series"/g)).toHaveLength(2);
    expect(html.match(/<rect class="bar"/g)).toHaveLength(2);
    expect(html).toContain('data-n="3"');
  });
});
