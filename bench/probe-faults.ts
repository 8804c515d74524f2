// The probe's tier checks against each fault (`npm run probe:faults`): for every configuration, a
// fresh `tessera up --prefill 2 --kv-disk DIR --prefill-kv-pages 512 --api-keys` (builtin:austen)
// and one `tessera probe --checks grammar-timing,disk-timing,prefill-timing,response-order
// --evict-tokens 24000` against it, in this one run:
//   clean                               no fault: every check clean, every positive control significant
//   share-grammar-cache-across-tenants  grammar-timing: a finding
//   spill-without-namespace             disk-timing: a finding (B loads A's spilled pages)
//   prefix-key-without-tenant           alone: none (a fetch needs the router's hint, from B's own index)
//   index+peer keys without tenant      with share-prefix-index-across-tenants too: B's request sent by
//                                       load gets a hint naming A's holder, which serves A's pages
//   one key twice                       no tenants: every check's cross-tenant arm is A itself
// Prints per configuration and check: verdict, positive-control p, cross-tenant p, the effect
// (median ratio, or pairs first), the check's wall time. A measurement: it asserts nothing.
//   node --import ./bench/lib/register-ts.mjs bench/probe-faults.ts [--budget 1] [--only NAME,...]
// Needs `npm run build` (the cluster and the probe run from dist/).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FAULT_NAMES } from '../src/core/index.js';
import { runCli } from '../test/e2e/support/process.js';
import { resultOf, startCluster } from '../test/e2e/probe/support.js';
import type { ProbeReport } from '../src/probe/index.js';

const args = process.argv.slice(2);
const opt = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const BUDGET = opt('--budget') ?? '1';
const CHECKS = ['grammar-timing', 'disk-timing', 'prefill-timing', 'response-order'] as const;
const CONFIGS: readonly { name: string; fault?: string; sameKey?: boolean }[] = [
  { name: 'clean' },
  { name: 'share-grammar-cache-across-tenants', fault: 'share-grammar-cache-across-tenants' },
  { name: 'spill-without-namespace', fault: 'spill-without-namespace' },
  { name: 'prefix-key-without-tenant', fault: 'prefix-key-without-tenant' },
  {
    name: 'index+peer keys without tenant',
    fault: 'share-prefix-index-across-tenants,prefix-key-without-tenant',
  },
  { name: 'one key twice', sameKey: true },
];
const only = opt('--only')?.split(',');

const fmt = (p: number | undefined): string => (p === undefined ? '-' : p < 1e-3 ? p.toExponential(1) : p.toFixed(3));

function row(config: string, report: ProbeReport, check: string): string {
  const r = resultOf(report, check);
  const f = r.figures as {
    control?: { pValue?: number; medianRatio?: number; hitFirst?: number; n?: number };
    cross?: { pValue?: number; medianRatio?: number; hitFirst?: number; n?: number };
  };
  const effect = (x: typeof f.control) =>
    x?.hitFirst !== undefined ? `${x.hitFirst}/${x.n} first` : `x${(x?.medianRatio ?? Number.NaN).toFixed(2)}`;
  return [
    config.padEnd(36),
    check.padEnd(15),
    r.status.padEnd(13),
    `control p ${fmt(f.control?.pValue)} (${effect(f.control)})`.padEnd(34),
    `cross p ${fmt(f.cross?.pValue)} (${effect(f.cross)})`.padEnd(32),
    `${(r.wallMs / 1000).toFixed(1)} s, ${r.numRequests} requests`,
  ].join(' ');
}

const lines: string[] = [];
for (const config of CONFIGS) {
  if (only !== undefined && !only.includes(config.name)) continue;
  if (config.fault?.split(',').some((f) => !(FAULT_NAMES as readonly string[]).includes(f)) === true) {
    lines.push(`${config.name.padEnd(36)} (no such fault point in this tree: not measured)`);
    continue;
  }
  const diskDir = await mkdtemp(join(tmpdir(), 'tessera-probe-faults-'));
  const started = performance.now();
  const cluster = await startCluster(
    `up-${config.name.replace(/ /g, '-')}`,
    ['--prefill', '2', '--kv-disk', diskDir, '--prefill-kv-pages', '512'],
    config.fault,
  );
  const startMs = performance.now() - started;
  try {
    const json = join(cluster.dir, 'report.json');
    const keyB = config.sameKey === true ? 'key-alice' : 'key-bob';
    const run = await runCli(
      [
        'probe',
        '--base-url',
        cluster.url,
        '--api-key',
        'key-alice',
        '--api-key',
        keyB,
        '--checks',
        CHECKS.join(','),
        '--budget',
        BUDGET,
        '--evict-tokens',
        '24000',
        '--seed',
        '7',
        '--json',
        json,
      ],
      cluster.home,
      {},
      600_000,
    );
    const report = JSON.parse(await (await import('node:fs/promises')).readFile(json, 'utf8')) as ProbeReport;
    const block = [
      `${config.name}: exit ${run.code}, cluster up in ${(startMs / 1000).toFixed(1)} s`,
      ...CHECKS.map((c) => row(config.name, report, c)),
    ];
    process.stdout.write(`${block.join('\n')}\n`);
    lines.push(...block);
  } finally {
    await cluster.stop();
    await rm(diskDir, { recursive: true, force: true });
  }
}
process.stdout.write(`\nsummary\n${lines.join('\n')}\n`);
