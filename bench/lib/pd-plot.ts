// bench:pd's SVG: left, the distribution of chats' ITL (empirical CDF, log-scale ms) for each
// series; right, ITL over time for the series that carry points (the phases with long prompts).
// Plain SVG text, no dependency. (The dashboard's plot helpers are another module's.)
export interface Series {
  readonly label: string;
  readonly itl: readonly number[];
  readonly points: readonly (readonly [number, number])[];
}

const COLORS = ['#1f77b4', '#aec7e8', '#d62728', '#ff9896', '#2ca02c', '#98df8a'];
const W = 480;
const H = 300;
const M = { l: 50, r: 10, t: 30, b: 40 };

export function itlPlotSvg(series: readonly Series[], title: string): string {
  const all = series.flatMap((s) => s.itl).filter((x) => x > 0);
  const lo = Math.max(0.1, Math.min(...all, 1));
  const hi = Math.max(...all, 10);
  const lx = (ms: number): number =>
    M.l + ((Math.log10(Math.max(ms, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (W - M.l - M.r);
  const cy = (q: number): number => H - M.b - q * (H - M.t - M.b);
  const cdf = series.map((s, i) => {
    const sorted = [...s.itl].sort((a, b) => a - b);
    const step = Math.max(1, Math.floor(sorted.length / 400));
    const pts: string[] = [];
    for (let k = 0; k < sorted.length; k += step)
      pts.push(`${lx(sorted[k] as number).toFixed(1)},${cy((k + 1) / sorted.length).toFixed(1)}`);
    return `<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.5" points="${pts.join(' ')}"/>`;
  });
  const timed = series
    .map((s, i) => ({ s, color: COLORS[i % COLORS.length] as string }))
    .filter((x) => x.s.points.length > 0);
  const tMax = Math.max(1, ...timed.flatMap((x) => x.s.points.map((p) => p[0])));
  const tx = (t: number): number => W + M.l + (t / tMax) * (W - M.l - M.r);
  const ty = (ms: number): number =>
    H - M.b - ((Math.log10(Math.max(ms, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (H - M.t - M.b);
  const dots = timed.flatMap(({ s, color }) => {
    const step = Math.max(1, Math.floor(s.points.length / 1500));
    return s.points
      .filter((_, k) => k % step === 0)
      .map((p) => `<circle cx="${tx(p[0]).toFixed(1)}" cy="${ty(p[1]).toFixed(1)}" r="1.2" fill="${color}"/>`);
  });
  const ticks = [0.1, 1, 10, 100, 1000, 10000].filter((v) => v >= lo && v <= hi);
  const axis = [
    ...ticks.map(
      (v) => `<text x="${lx(v).toFixed(1)}" y="${H - M.b + 14}" font-size="10" text-anchor="middle">${v}</text>`,
    ),
    ...ticks.map(
      (v) => `<text x="${W + M.l - 4}" y="${ty(v).toFixed(1)}" font-size="10" text-anchor="end">${v}</text>`,
    ),
    ...[0, 0.5, 0.9, 0.99, 1].map(
      (q) => `<text x="${M.l - 4}" y="${cy(q).toFixed(1)}" font-size="10" text-anchor="end">${q}</text>`,
    ),
    `<text x="${W / 2}" y="${H - 8}" font-size="11" text-anchor="middle">ITL (ms, log)</text>`,
    `<text x="${W + W / 2}" y="${H - 8}" font-size="11" text-anchor="middle">time (s, 0-${(tMax / 1000).toFixed(0)}); ITL (ms, log)</text>`,
    `<rect x="${M.l}" y="${M.t}" width="${W - M.l - M.r}" height="${H - M.t - M.b}" fill="none" stroke="#999"/>`,
    `<rect x="${W + M.l}" y="${M.t}" width="${W - M.l - M.r}" height="${H - M.t - M.b}" fill="none" stroke="#999"/>`,
  ];
  const legend = series.map(
    (s, i) =>
      `<text x="${M.l + 6}" y="${M.t + 14 + 12 * i}" font-size="10" fill="${COLORS[i % COLORS.length]}">${escape(s.label)}</text>`,
  );
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W}" height="${H}" font-family="sans-serif">\n` +
    `<text x="${W}" y="16" font-size="13" text-anchor="middle">${escape(title)}</text>\n` +
    [...axis, ...cdf, ...dots, ...legend].join('\n') +
    '\n</svg>\n'
  );
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
