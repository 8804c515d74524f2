// The incident put back (placeholder-done on prefill, skip-page-check on decode, through
// TESSERA_FAULT on `tessera up`): decode generates from stale pages that A's requests wrote, so
// B's greedy answer changes with what ran before it. `tessera probe` catches it from outside,
// with the HTTP API only, and exits 1. The cluster is --deterministic, so the probe is told
// --batch-invariant and any change of a greedy answer is a finding.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probe, resultOf, startCluster, type Cluster } from './support.js';

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster('up-incident', ['--deterministic'], 'placeholder-done,skip-page-check');
});
afterAll(async () => cluster?.stop());

describe('tessera probe against the incident (placeholder-done,skip-page-check)', () => {
  it("exits 1: non-interference finds B's greedy answer changing; the report names the requests", async () => {
    const run = await probe(cluster, [
      '--checks',
      'canary,non-interference',
      '--batch-invariant',
      '--budget',
      '24',
      '--seed',
      '3',
    ]);
    expect(run.code, run.stderr).toBe(1);
    const ni = resultOf(run.report, 'non-interference');
    expect(ni.status).toBe('finding');
    expect(ni.findings.length).toBeGreaterThan(0);
    expect(ni.findings[0]?.requests.length).toBeGreaterThan(0);
    const changed = ni.figures['changed'] as Record<string, number>;
    expect(changed['alone'] + changed['amid-A'] + changed['amid-B']).toBeGreaterThan(0);
    expect(run.stdout).toMatch(/non-interference +FINDING/);
    expect(run.stdout).toMatch(/LEAK OR SIGNAL FOUND \(exit 1\)/);
    // Every request is in the JSON, the findings' requests among them.
    const ids = new Set(run.report.requests.map((r) => r.id));
    for (const id of ni.findings[0]?.requests ?? []) expect(ids.has(id)).toBe(true);
  });
});
