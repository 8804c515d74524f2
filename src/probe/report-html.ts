// The self-contained HTML report: verdicts, each check's evidence and plots (inline SVG), its
// figures, and every request sent. No scripts, no external assets: it opens offline.
import { escapeHtml, renderPlot } from './svg.js';
import type { CheckResult, ProbeReport } from './types.js';

const CSS = `body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222}
h1{font-size:22px}
h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
.clean{color:#1a7f37;font-weight:600}
.finding{color:#c62828;font-weight:700}
.inconclusive{color:#b26a00;font-weight:600}
.error{color:#6a1b9a;font-weight:600}
.plots{display:flex;flex-wrap:wrap;gap:12px}
svg.plot{background:#fafafa;border:1px solid #e3e3e3}
svg .title{font-size:13px;font-weight:600}
svg .tick,svg .legend{font-size:11px}
svg .axis{font-size:12px}
svg .grid{stroke:#e6e6e6}
svg .axisline{stroke:#888}
pre{background:#f6f6f6;padding:8px;overflow:auto;max-height:420px;font-size:12px}
.verdict{font-size:16px;padding:8px 12px;border-radius:4px;display:inline-block}
.v0{background:#e8f5e9}
.v1{background:#ffebee}`;

const VERDICT = {
  0: 'Nothing was found (exit 0). Clean is evidence for these paths at this load, not a proof.',
  1: 'A leak or a timing signal was found (exit 1).',
  2: 'A check could not run (exit 2): no verdict.',
} as const;

function section(r: CheckResult): string {
  const findings =
    r.findings.length === 0
      ? '<p>No finding.</p>'
      : `<ul>${r.findings.map((f) => `<li>${escapeHtml(f.what)} <small>(requests ${escapeHtml(f.requests.slice(0, 20).join(', '))}${f.requests.length > 20 ? ', ...' : ''})</small></li>`).join('')}</ul>`;
  return (
    `<section class="check" id="${r.check}"><h2>${escapeHtml(r.check)}: <span ` +
    `class="${r.status}">${r.status}</span></h2>` +
    `<p>${escapeHtml(r.summary)}</p><p><small>${r.numRequests} requests (budget ${r.budgetRequests}), ` +
    `${(r.wallMs / 1000).toFixed(1)} s${r.context === undefined ? '' : `; context ${escapeHtml(r.context)}`}` +
    `</small></p>` +
    findings +
    `<div class="plots">${r.plots.map(renderPlot).join('')}</div>` +
    `<details><summary>figures</summary><pre>${escapeHtml(JSON.stringify(r.figures, null, 2))}</pre>` +
    `</details></section>`
  );
}

function requestRows(report: ProbeReport): string {
  const prompt = (body: unknown): string => {
    const p = (body as { prompt?: unknown } | null)?.prompt;
    if (Array.isArray(p)) return `${p.length} token ids`;
    if (typeof p === 'string') return `${p.length} chars`;
    return typeof body === 'string' ? `raw: ${body.slice(0, 40)}` : '';
  };
  return report.requests
    .map(
      (r) =>
        `<tr><td>${r.id}</td><td>${escapeHtml(r.check)}</td><td>${r.tenant}</td><td>${escapeHtml(r.purpose)}` +
        `</td><td>${escapeHtml(prompt(r.body))}</td>` +
        `<td>${r.status ?? escapeHtml(r.error ?? 'none')}</td>` +
        `<td>${r.ttftMs === undefined ? '' : r.ttftMs.toFixed(1)}</td>` +
        `<td>${r.totalMs === undefined ? '' : r.totalMs.toFixed(1)}</td>` +
        `<td>${escapeHtml((r.texts ?? []).join(' | ').slice(0, 120))}</td></tr>`,
    )
    .join('');
}

export function renderHtml(report: ProbeReport): string {
  const rows = report.results
    .map(
      (r) =>
        `<tr><td><a href="#${r.check}">${escapeHtml(r.check)}</a></td><td ` +
        `class="${r.status}">${r.status}</td><td>${r.numRequests}/${r.budgetRequests}</td>` +
        `<td>${(r.wallMs / 1000).toFixed(1)} s</td>` +
        `<td>${escapeHtml(r.summary)}</td></tr>`,
    )
    .join('');
  const s = report.server;
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>tessera probe: ` +
    `${escapeHtml(report.baseUrl)}</title><style>${CSS}</style></head><body>` +
    `<h1>tessera probe of ${escapeHtml(report.baseUrl)}</h1>` +
    `<p>Model <b>${escapeHtml(s.model)}</b>, context ${s.contextLength} ` +
    `tokens (from ${escapeHtml(s.contextSource)})${s.poolLimit === null ? '' : `, admits prompts up to ${s.poolLimit} tokens`}. ` +
    `${s.sameKey ? 'One API key given twice: the server has no tenants to tell apart.' : 'Two tenants (two API keys).'} Started ${escapeHtml(report.startedAt)}, seed ${report.options.seed}, budget ${report.options.budget}.</p>` +
    `<p class="verdict v${report.exitCode}">${VERDICT[report.exitCode]}</p>` +
    `<table><tr><th>check</th><th>verdict</th><th>requests</th><th>time</th><th>evidence</th></tr>${rows}</table>` +
    report.results.map(section).join('') +
    `<h2>Every request (${report.requests.length})</h2><details><summary>show</summary><table><tr><th>#</th>` +
    `<th>check</th><th>tenant</th><th>purpose</th><th>prompt</th><th>status</th><th>TTFT ms</th><th>total ms` +
    `</th><th>text</th></tr>${requestRows(report)}</table></details>` +
    `</body></html>\n`
  );
}
