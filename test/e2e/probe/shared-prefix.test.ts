// A prefix cache shared across tenants, seen from outside by prefix-timing (exit 1), two ways:
// - one API key given twice (a server without tenants, as the probe says): B's repeats of A's
//   prompts are cache hits, and the one-sided KS test on TTFT shows it (p < 0.01), as Gu et al.
//   measured at API providers;
// - share-prefix-across-tenants put back on the prefill worker: the cache hands B tenant A's
//   pages; Tessera's ledger still refuses the cross-tenant reference (defence 3), so the worker
//   stops with an InvariantError on B's first repeat of A's prompt. The probe reports that
//   failure pattern, which B can use as an oracle of A's prompts, as a finding.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/process.js';
import { probe, resultOf, startCluster, type Cluster } from './support.js';

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster('up-shared-prefix', [], 'share-prefix-across-tenants');
});
afterAll(async () => cluster?.stop());

describe('tessera probe against a prefix cache shared across tenants', () => {
  it('one key twice (no tenants): the cross-tenant KS test is significant beside its positive control', async () => {
    const jsonArgs = ['--checks', 'prefix-timing', '--budget', '32', '--seed', '5'];
    const run = await runCli(
      [
        'probe',
        '--base-url',
        cluster.url,
        '--api-key',
        'key-alice',
        '--api-key',
        'key-alice',
        '--json',
        `${cluster.dir}/same.json`,
        ...jsonArgs,
      ],
      cluster.home,
      {},
      120_000,
    );
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toMatch(/the same API key for both tenants/);
    expect(run.stdout).toMatch(/one key given twice/);
    const report = JSON.parse(
      await import('node:fs/promises').then((fs) => fs.readFile(`${cluster.dir}/same.json`, 'utf8')),
    );
    const pt = resultOf(report, 'prefix-timing');
    expect(pt.status).toBe('finding');
    const figures = pt.figures as { cross: { pValue: number; medianRatio: number }; control: { pValue: number } };
    expect(figures.control.pValue).toBeLessThan(0.01);
    expect(figures.cross.pValue).toBeLessThan(0.01);
    expect(figures.cross.medianRatio).toBeLessThan(0.8);
  });

  it("two tenants with share-prefix-across-tenants: exit 1, B's repeat of A's prompt is where the server breaks", async () => {
    const run = await probe(cluster, ['--checks', 'prefix-timing', '--budget', '32', '--seed', '6']);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    const pt = resultOf(run.report, 'prefix-timing');
    expect(pt.status).toBe('finding');
    expect(pt.findings.map((f) => f.what).join('\n')).toMatch(/B's repeat of A's prompt failed \(HTTP 5\d\d/);
    expect(run.stdout).toMatch(/prefix-timing +FINDING/);
  });
});
