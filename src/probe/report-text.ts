// The verdict table on stdout, and the progress bars on stderr. Pure string building.
import type { CheckResult, ProbeReport } from './types.js';

const STATUS_WORD = { clean: 'clean', finding: 'FINDING', inconclusive: 'inconclusive', error: 'error' } as const;

export function verdictTable(report: ProbeReport): string {
  const rows = report.results.map((r: CheckResult) => [
    r.check,
    STATUS_WORD[r.status],
    `${r.numRequests}/${r.budgetRequests}`,
    `${(r.wallMs / 1000).toFixed(1)} s`,
    r.summary,
  ]);
  const head = ['check', 'verdict', 'requests', 'time', 'evidence'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] as number))).join('  ');
  const tenants = report.server.sameKey
    ? 'one key given twice: the server has no tenants to tell apart, so cross-tenant results describe one ' +
      'tenant with itself'
    : 'tenants A and B: two API keys';
  const findings = report.results.flatMap((r) =>
    r.findings.map(
      (f) =>
        `  ${r.check}: ${f.what} (requests ` +
        `${f.requests.slice(0, 8).join(', ')}${f.requests.length > 8 ? ', ...' : ''})`,
    ),
  );
  const sized = report.results.filter((r) => r.context !== undefined).map((r) => r.check);
  return [
    `tessera probe of ${report.baseUrl} (model ${report.server.model}, context ${report.server.contextLength}` +
      `${report.server.poolLimit === null ? '' : `, admits at most ${report.server.poolLimit} tokens`}; ${tenants})`,
    ...(sized.length > 0
      ? [
          `context used by ${sized.join(', ')}: ${report.server.contextLength} tokens, from ` +
            `${report.server.contextSource}`,
        ]
      : []),
    line(head),
    ...rows.map(line),
    ...(findings.length > 0 ? ['findings:', ...findings] : []),
    report.exitCode === 1
      ? 'verdict: LEAK OR SIGNAL FOUND (exit 1)'
      : report.exitCode === 2
        ? 'verdict: a check could not run (exit 2): no verdict'
        : 'verdict: nothing found (exit 0); see docs/probe.md, "What clean does and does not prove"',
    '',
  ].join('\n');
}

/** One progress line of a check: `canary        [########------------]  12/40`. */
export function progressLine(check: string, done: number, total: number): string {
  const width = 20;
  const filled = total === 0 ? width : Math.min(width, Math.round((done / total) * width));
  return (
    `${check.padEnd(17)} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ` + `${String(done).padStart(3)}/${total}`
  );
}
