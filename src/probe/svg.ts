// Inline SVG plots for the HTML report, pure string building: empirical CDFs of samples (one
// step line per series) and bar charts. No scripts, fonts or external assets.
import type { Plot, Series } from './types.js';

const W = 560;
const H = 290;
const M = { left: 56, right: 16, top: 28, bottom: 40 };
/** The ECDF's legend sits below its x axis, so it never hides a line. */
const LEGEND_ROWS_H = 40;
const COLORS = ['#1f77b4', '#2ca02c', '#ff7f0e', '#d62728', '#9467bd', '#8c564b'];

export function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function niceTicks(lo: number, hi: number, count: number): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = ([1, 2, 5, 10].find((s) => s * mag >= raw) ?? 10) * mag;
  const ticks: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

function frame(title: string, kind: string, body: string, height = H): string {
  return (
    `<svg class="plot" data-kind="${kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${height}" ` +
    `width="${W}" height="${height}" role="img" aria-label="${escapeHtml(title)}">` +
    `<text x="${W / 2}" y="16" text-anchor="middle" class="title">${escapeHtml(title)}</text>${body}</svg>`
  );
}

function ecdf(title: string, unit: string, series: readonly Series[]): string {
  const all = series.flatMap((s) => s.values);
  const lo = Math.min(0, ...all);
  const hi = Math.max(1, ...all) * 1.05;
  const x = (v: number) => M.left + ((v - lo) / (hi - lo)) * (W - M.left - M.right);
  const y = (p: number) => H - M.bottom - p * (H - M.top - M.bottom);
  let body = '';
  for (const t of niceTicks(lo, hi, 6)) {
    body +=
      `<line class="grid" x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="${M.top}" y2="${H - M.bottom}"/>` +
      `<text class="tick" x="${x(t).toFixed(1)}" y="${H - M.bottom + 14}" text-anchor="middle">${t}</text>`;
  }
  for (const p of [0, 0.25, 0.5, 0.75, 1]) {
    body +=
      `<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y(p).toFixed(1)}" y2="${y(p).toFixed(1)}"/>` +
      `<text class="tick" x="${M.left - 6}" y="${(y(p) + 4).toFixed(1)}" text-anchor="end">${p}</text>`;
  }
  body +=
    `<text class="axis" x="${(M.left + W - M.right) / 2}" y="${H - 6}" ` +
    `text-anchor="middle">${escapeHtml(unit)}</text>`;
  body +=
    `<text class="axis" x="14" y="${(M.top + H - M.bottom) / 2}" text-anchor="middle" ` +
    `transform="rotate(-90 14 ${(M.top + H - M.bottom) / 2})">fraction of samples</text>`;
  series.forEach((s, i) => {
    const sorted = [...s.values].sort((a, b) => a - b);
    let d = `M${x(lo).toFixed(1)},${y(0).toFixed(1)}`;
    sorted.forEach((v, k) => (d += ` H${x(v).toFixed(1)} V${y((k + 1) / sorted.length).toFixed(1)}`));
    d += ` H${x(hi).toFixed(1)}`;
    const color = COLORS[i % COLORS.length] as string;
    body +=
      `<path class="series" data-series="${escapeHtml(s.name)}" data-n="${sorted.length}" d="${d}" ` +
      `fill="none" stroke="${color}" stroke-width="2"/>`;
    const lx = M.left + (i % 2) * 250;
    const ly = H + 8 + Math.floor(i / 2) * 16;
    body +=
      `<rect x="${lx}" y="${ly - 5}" width="14" height="4" fill="${color}"/>` +
      `<text class="legend" x="${lx + 20}" y="${ly}">${escapeHtml(`${s.name} (n=${sorted.length})`)}</text>`;
  });
  return frame(title, 'ecdf', body, H + LEGEND_ROWS_H);
}

function bars(title: string, unit: string, items: readonly { label: string; value: number }[]): string {
  const hi = Math.max(1, ...items.map((b) => b.value)) * 1.15;
  const slot = (W - M.left - M.right) / Math.max(1, items.length);
  const y = (v: number) => H - M.bottom - (v / hi) * (H - M.top - M.bottom);
  let body = `<line class="axisline" x1="${M.left}" x2="${W - M.right}" y1="${H - M.bottom}" y2="${H - M.bottom}"/>`;
  for (const t of niceTicks(0, hi, 4)) {
    body +=
      `<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y(t).toFixed(1)}" y2="${y(t).toFixed(1)}"/>` +
      `<text class="tick" x="${M.left - 6}" y="${(y(t) + 4).toFixed(1)}" text-anchor="end">${t}</text>`;
  }
  items.forEach((b, i) => {
    const x0 = M.left + i * slot + slot * 0.2;
    const height = H - M.bottom - y(b.value);
    // A zero still draws a hairline, so an empty bar is visibly "0", not missing.
    body +=
      `<rect class="bar" data-value="${b.value}" x="${x0.toFixed(1)}" ` +
      `y="${(y(b.value) - (b.value === 0 ? 1 : 0)).toFixed(1)}" width="${(slot * 0.6).toFixed(1)}" ` +
      `height="${Math.max(1, height).toFixed(1)}" fill="${COLORS[i % COLORS.length] as string}"/>` +
      `<text class="tick" x="${(x0 + slot * 0.3).toFixed(1)}" y="${(y(b.value) - 5).toFixed(1)}" ` +
      `text-anchor="middle">${b.value}</text>` +
      `<text class="legend" x="${(x0 + slot * 0.3).toFixed(1)}" y="${H - M.bottom + 14}" ` +
      `text-anchor="middle">${escapeHtml(b.label)}</text>`;
  });
  body +=
    `<text class="axis" x="14" y="${(M.top + H - M.bottom) / 2}" text-anchor="middle" ` +
    `transform="rotate(-90 14 ${(M.top + H - M.bottom) / 2})">${escapeHtml(unit)}</text>`;
  return frame(title, 'bars', body);
}

export function renderPlot(plot: Plot): string {
  switch (plot.kind) {
    case 'ecdf':
      return ecdf(plot.title, plot.unit, plot.series);
    case 'bars':
      return bars(plot.title, plot.unit, plot.bars);
  }
}
