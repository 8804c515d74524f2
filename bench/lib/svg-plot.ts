// Small, dependency-free SVG plots for the benchmarks: each bench writes one beside its JSON in
// bench/results/ (`svgPathFor`). Three shapes cover them: grouped vertical bars (decode: tokens/s
// by batch size, one bar per engine), horizontal bars (transfer: GB/s per variant) and a row of
// line panels over one x axis (serve: throughput and latencies by concurrency).
// Pure: strings in, a standalone SVG document out (no fonts, scripts or links to load). Must never
// draw a missing value as zero: null values leave a gap.

export interface BarSeries {
  readonly name: string;
  /** One per category; null: not measured. */
  readonly values: readonly (number | null)[];
}

export interface GroupedBars {
  readonly title: string;
  readonly subtitle?: string;
  readonly unit: string;
  readonly categories: readonly string[];
  readonly series: readonly BarSeries[];
}

export interface HorizontalBars {
  readonly title: string;
  readonly subtitle?: string;
  readonly unit: string;
  readonly bars: readonly { readonly label: string; readonly value: number; readonly note?: string }[];
}

export interface LinePanel {
  readonly title: string;
  readonly unit: string;
  readonly series: readonly {
    readonly name: string;
    readonly points: readonly { readonly x: number; readonly y: number }[];
  }[];
}

export interface LinePanels {
  readonly title: string;
  readonly subtitle?: string;
  readonly xLabel: string;
  readonly panels: readonly LinePanel[];
}

export const PALETTE = [
  '#2f7ed8',
  '#f28f43',
  '#1aadce',
  '#8bbc21',
  '#910000',
  '#492970',
  '#77a1e5',
  '#c42525',
] as const;
const FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"';

/** bench/results/decode-X.json -> bench/results/decode-X.svg */
export function svgPathFor(jsonPath: string): string {
  return jsonPath.replace(/\.json$/, '') + '.svg';
}

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A round axis maximum at or above `max` (1, 2, 2.5, 5 x 10^k) and its tick step. */
export function niceScale(max: number, ticks = 5): { readonly max: number; readonly step: number } {
  if (!(max > 0) || !Number.isFinite(max)) return { max: 1, step: 0.2 };
  const raw = max / ticks;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * magnitude >= raw) ?? 10) * magnitude;
  return { max: step * Math.ceil(max / step - 1e-9), step };
}

function formatTick(value: number): string {
  if (value === 0) return '0';
  if (Math.abs(value) >= 1000) return `${+(value / 1000).toFixed(1)}k`;
  return String(+value.toFixed(Math.abs(value) < 1 ? 2 : 1));
}

function document(width: number, height: number, body: string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT} font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}

function heading(title: string, subtitle: string | undefined): string[] {
  const lines = [`<text x="16" y="24" font-size="16" font-weight="bold" fill="#222">${escapeXml(title)}</text>`];
  if (subtitle !== undefined) lines.push(`<text x="16" y="42" fill="#666">${escapeXml(subtitle)}</text>`);
  return lines;
}

/** Wide enough for the title and subtitle (about 6.5 px a character at 12 px, 9 at 16 px). */
function headingWidth(chart: { readonly title: string; readonly subtitle?: string }): number {
  return Math.ceil(32 + Math.max(chart.title.length * 9, (chart.subtitle ?? '').length * 6.5));
}

function legend(names: readonly string[], x: number, y: number): string[] {
  let at = x;
  return names.flatMap((name, i) => {
    const item = [
      `<rect x="${at}" y="${y - 9}" width="10" height="10" fill="${PALETTE[i % PALETTE.length]}"/>`,
      `<text x="${at + 14}" y="${y}" fill="#333">${escapeXml(name)}</text>`,
    ];
    at += 24 + name.length * 7;
    return item;
  });
}

/** Vertical y axis with grid lines from 0 to scale.max, into the plot box. */
function yAxis(
  box: { x: number; y: number; w: number; h: number },
  scale: { max: number; step: number },
  unit: string,
): string[] {
  const out: string[] = [];
  for (let v = 0; v <= scale.max + 1e-9; v += scale.step) {
    const y = box.y + box.h - (v / scale.max) * box.h;
    out.push(`<line x1="${box.x}" y1="${y.toFixed(1)}" x2="${box.x + box.w}" y2="${y.toFixed(1)}" stroke="#e6e6e6"/>`);
    out.push(`<text x="${box.x - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end" fill="#555">${formatTick(v)}</text>`);
  }
  out.push(
    `<text transform="translate(${box.x - 42},${box.y + box.h / 2}) rotate(-90)" text-anchor="middle" fill="#555">${escapeXml(unit)}</text>`,
  );
  out.push(`<line x1="${box.x}" y1="${box.y + box.h}" x2="${box.x + box.w}" y2="${box.y + box.h}" stroke="#999"/>`);
  return out;
}

export function groupedBarsSvg(chart: GroupedBars): string {
  const width = Math.max(520, 120 + chart.categories.length * (chart.series.length * 26 + 40), headingWidth(chart));
  const height = 380;
  const box = { x: 70, y: 78, w: width - 90, h: height - 130 };
  const values = chart.series.flatMap((s) => s.values.filter((v): v is number => v !== null));
  const scale = niceScale(Math.max(0, ...values));
  const body = [
    ...heading(chart.title, chart.subtitle),
    ...legend(
      chart.series.map((s) => s.name),
      16,
      62,
    ),
    ...yAxis(box, scale, chart.unit),
  ];
  const groupW = box.w / chart.categories.length;
  const barW = Math.min(26, (groupW - 20) / chart.series.length);
  chart.categories.forEach((category, c) => {
    const x0 = box.x + c * groupW + (groupW - barW * chart.series.length) / 2;
    chart.series.forEach((s, i) => {
      const v = s.values[c];
      if (v === null || v === undefined) return;
      const h = (v / scale.max) * box.h;
      const x = x0 + i * barW;
      body.push(
        `<rect x="${x.toFixed(1)}" y="${(box.y + box.h - h).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${PALETTE[i % PALETTE.length]}"><title>${escapeXml(`${s.name}, ${category}: ${v.toFixed(2)} ${chart.unit}`)}</title></rect>`,
      );
    });
    body.push(
      `<text x="${(box.x + c * groupW + groupW / 2).toFixed(1)}" y="${box.y + box.h + 18}" text-anchor="middle" fill="#333">${escapeXml(category)}</text>`,
    );
  });
  return document(width, height, body);
}

export function horizontalBarsSvg(chart: HorizontalBars): string {
  const labelW = Math.min(360, 12 + Math.max(...chart.bars.map((b) => b.label.length), 10) * 6.6);
  const rowH = 26;
  const width = 820;
  const box = { x: labelW + 16, y: 60, w: width - labelW - 90, h: chart.bars.length * rowH };
  const height = box.y + box.h + 44;
  const scale = niceScale(Math.max(0, ...chart.bars.map((b) => b.value)));
  const body = heading(chart.title, chart.subtitle);
  for (let v = 0; v <= scale.max + 1e-9; v += scale.step) {
    const x = box.x + (v / scale.max) * box.w;
    body.push(`<line x1="${x.toFixed(1)}" y1="${box.y}" x2="${x.toFixed(1)}" y2="${box.y + box.h}" stroke="#e6e6e6"/>`);
    body.push(
      `<text x="${x.toFixed(1)}" y="${box.y + box.h + 16}" text-anchor="middle" fill="#555">${formatTick(v)}</text>`,
    );
  }
  body.push(
    `<text x="${box.x + box.w / 2}" y="${box.y + box.h + 34}" text-anchor="middle" fill="#555">${escapeXml(chart.unit)}</text>`,
  );
  chart.bars.forEach((b, i) => {
    const y = box.y + i * rowH + 4;
    const w = (b.value / scale.max) * box.w;
    body.push(`<text x="${box.x - 8}" y="${y + 13}" text-anchor="end" fill="#333">${escapeXml(b.label)}</text>`);
    body.push(`<rect x="${box.x}" y="${y}" width="${w.toFixed(1)}" height="${rowH - 8}" fill="${PALETTE[0]}"/>`);
    body.push(
      `<text x="${(box.x + w + 6).toFixed(1)}" y="${y + 13}" fill="#333">${escapeXml(`${b.value.toFixed(2)}${b.note === undefined ? '' : ` (${b.note})`}`)}</text>`,
    );
  });
  return document(width, height, body);
}

export function linePanelsSvg(chart: LinePanels): string {
  const panelW = 300;
  const width = Math.max(16 + chart.panels.length * (panelW + 16), headingWidth(chart));
  const height = 330;
  const names = [...new Set(chart.panels.flatMap((p) => p.series.map((s) => s.name)))];
  const body = [...heading(chart.title, chart.subtitle), ...legend(names, 16, 62)];
  chart.panels.forEach((panel, p) => {
    const box = { x: 16 + p * (panelW + 16) + 56, y: 96, w: panelW - 70, h: height - 150 };
    const points = panel.series.flatMap((s) => s.points);
    const xs = [...new Set(points.map((pt) => pt.x))].sort((a, b) => a - b);
    const scale = niceScale(Math.max(0, ...points.map((pt) => pt.y)));
    const xAt = (x: number): number => box.x + (xs.length <= 1 ? box.w / 2 : (xs.indexOf(x) / (xs.length - 1)) * box.w);
    body.push(
      `<text x="${box.x + box.w / 2}" y="${box.y - 12}" text-anchor="middle" font-weight="bold" fill="#333">${escapeXml(panel.title)}</text>`,
    );
    body.push(...yAxis(box, scale, panel.unit));
    for (const x of xs)
      body.push(
        `<text x="${xAt(x).toFixed(1)}" y="${box.y + box.h + 16}" text-anchor="middle" fill="#555">${formatTick(x)}</text>`,
      );
    body.push(
      `<text x="${box.x + box.w / 2}" y="${box.y + box.h + 34}" text-anchor="middle" fill="#555">${escapeXml(chart.xLabel)}</text>`,
    );
    for (const s of panel.series) {
      const colour = PALETTE[names.indexOf(s.name) % PALETTE.length];
      const yAt = (y: number): number => box.y + box.h - (y / scale.max) * box.h;
      const d = s.points
        .map((pt, i) => `${i === 0 ? 'M' : 'L'}${xAt(pt.x).toFixed(1)},${yAt(pt.y).toFixed(1)}`)
        .join('');
      if (d !== '') body.push(`<path d="${d}" fill="none" stroke="${colour}" stroke-width="2"/>`);
      for (const pt of s.points)
        body.push(
          `<circle cx="${xAt(pt.x).toFixed(1)}" cy="${yAt(pt.y).toFixed(1)}" r="3" fill="${colour}"><title>${escapeXml(`${s.name} at ${pt.x}: ${pt.y.toFixed(2)} ${panel.unit}`)}</title></circle>`,
        );
    }
  });
  return document(width, height, body);
}
