// share-prefix-across-tenants put back: the prefill worker's prefix cache serves tenant A's
// pages to tenant B. The probe's prefix-timing check sees it from TTFT alone (B repeating A's
// prompt is as fast as A repeating its own), with a one-sided KS test, and exits 1.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probe, resultOf, startCluster, type Cluster } from './support.js';

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster('up-shared-prefix', [], 'share-prefix-across-tenants');
});
afterAll(async () => cluster?.stop());

describe('tessera probe against a prefix cache shared across tenants', () => {
  it('exits 1: prefix-timing\'s cross-tenant test is significant, and so is its positive control', async () => {
    const run = await probe(cluster, ['--checks', 'prefix-timing', '--budget', '32', '--seed', '5']);
    expect(run.code, run.stderr).toBe(1);
    const pt = resultOf(run.report, 'prefix-timing');
    expect(pt.status).toBe('finding');
    const figures = pt.figures as { cross: { pValue: number; medianRatio: number }; control: { pValue: number } };
    expect(figures.control.pValue).toBeLessThan(0.01);
    expect(figures.cross.pValue).toBeLessThan(0.01);
    expect(figures.cross.medianRatio).toBeLessThan(0.8);
    expect(run.stdout).toMatch(/prefix-timing +FINDING/);
  });
});
