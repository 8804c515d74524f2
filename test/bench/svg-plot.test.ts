// bench/lib/svg-plot.ts: round axes, escaped text, one mark per measured value (a gap for a
// missing one, never a zero bar), bar lengths proportional to the values, paths beside the JSON.
import { describe, expect, it } from 'vitest';
import {
  escapeXml,
  groupedBarsSvg,
  horizontalBarsSvg,
  linePanelsSvg,
  niceScale,
  svgPathFor,
} from '../../bench/lib/svg-plot.js';

const barRects = (svg: string): { height: number; width: number; y: number; title: string }[] =>
  [
    ...svg.matchAll(
      /<rect x="[\d.]+" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="#[0-9a-f]+"><title>([^<]*)<\/title><\/rect>/g,
    ),
  ].map((m) => ({
    y: Number(m[1]),
    width: Number(m[2]),
    height: Number(m[3]),
    title: m[4] as string,
  }));

describe('niceScale', () => {
  it('rounds the axis up to 1, 2, 2.5 or 5 times a power of ten', () => {
    expect(niceScale(87)).toEqual({ max: 100, step: 20 });
    expect(niceScale(3.2)).toEqual({ max: 4, step: 1 });
    expect(niceScale(1200)).toEqual({ max: 1250, step: 250 });
    expect(niceScale(0)).toEqual({ max: 1, step: 0.2 });
  });
});

describe('groupedBarsSvg', () => {
  const svg = groupedBarsSvg({
    title: 'Decode <tokens/s> & more',
    unit: 'tokens/s',
    categories: ['batch 1', 'batch 4'],
    series: [
      { name: 'tessera', values: [40, 80] },
      { name: 'llama.cpp', values: [20, null] },
    ],
  });

  it('is one standalone SVG document with its text escaped', () => {
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('Decode &lt;tokens/s&gt; &amp; more');
    expect(svg).not.toMatch(/<script|href=/);
  });

  it('draws one bar per measured value, proportional to it, and leaves a gap for a missing one', () => {
    const bars = barRects(svg);
    expect(bars.map((b) => b.title)).toEqual([
      'tessera, batch 1: 40.00 tokens/s',
      'llama.cpp, batch 1: 20.00 tokens/s',
      'tessera, batch 4: 80.00 tokens/s',
    ]);
    const [a, b, c] = bars.map((x) => x.height) as [number, number, number];
    expect(a / b).toBeCloseTo(2, 1);
    expect(c / a).toBeCloseTo(2, 1);
  });
});

describe('horizontalBarsSvg', () => {
  it('draws bars of lengths proportional to the values, with labels and notes', () => {
    const svg = horizontalBarsSvg({
      title: 'KV transfer',
      unit: 'GB/s',
      bars: [
        { label: 'raw socket', value: 2 },
        { label: 'a page per frame', value: 1.5, note: '0.75x raw' },
      ],
    });
    const widths = [...svg.matchAll(/<rect x="[\d.]+" y="[\d.]+" width="([\d.]+)" height="18"/g)].map((m) =>
      Number(m[1]),
    );
    expect(widths).toHaveLength(2);
    expect((widths[0] as number) / (widths[1] as number)).toBeCloseTo(2 / 1.5, 2);
    expect(svg).toContain('>raw socket<');
    expect(svg).toContain('1.50 (0.75x raw)');
  });
});

describe('linePanelsSvg', () => {
  it('draws one path per series per panel and one point per measurement', () => {
    const svg = linePanelsSvg({
      title: 'Serving',
      xLabel: 'concurrency',
      panels: [
        {
          title: 'throughput',
          unit: 'tok/s',
          series: [
            {
              name: 'output',
              points: [
                { x: 1, y: 10 },
                { x: 4, y: 30 },
                { x: 16, y: 45 },
              ],
            },
          ],
        },
        {
          title: 'latency',
          unit: 'ms',
          series: [
            {
              name: 'p50',
              points: [
                { x: 1, y: 5 },
                { x: 4, y: 9 },
              ],
            },
            {
              name: 'p99',
              points: [
                { x: 1, y: 8 },
                { x: 4, y: 20 },
              ],
            },
          ],
        },
      ],
    });
    expect(svg.match(/<path /g)).toHaveLength(3);
    expect(svg.match(/<circle /g)).toHaveLength(7);
    expect(svg).toContain('p99 at 4: 20.00 ms');
  });
});

it('svgPathFor puts the SVG beside its JSON', () => {
  expect(svgPathFor('bench/results/decode-2026-12-01T22-00-00-000Z.json')).toBe(
    'bench/results/decode-2026-12-01T22-00-00-000Z.svg',
  );
  expect(escapeXml('"a" < b')).toBe('&quot;a&quot; &lt; b');
});
