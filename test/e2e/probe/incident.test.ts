// The incident put back (placeholder-done on prefill, skip-page-check on decode, through
// TESSERA_FAULT on `tessera up`): decode generates from stale pages that earlier requests
// wrote. `tessera probe` catches it from outside, with the HTTP API only, and exits 1:
// - on `tessera up` as shipped (not batch-invariant), by non-interference's self-consistency:
//   B's greedy answer disagrees with the server's own one-step predictions;
// - on a --deterministic cluster, told --batch-invariant, also because B's greedy answer changes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probe, resultOf, startCluster, type Cluster } from './support.js';

const INCIDENT = 'placeholder-done,skip-page-check';
let shipped: Cluster;
let deterministic: Cluster;
beforeAll(async () => {
  [shipped, deterministic] = await Promise.all([
    startCluster('up-incident', [], INCIDENT),
    startCluster('up-incident-deterministic', ['--deterministic'], INCIDENT),
  ]);
});
afterAll(async () => Promise.all([shipped?.stop(), deterministic?.stop()]));

describe('tessera probe against the incident (placeholder-done,skip-page-check)', () => {
  it("exits 1 on tessera up as shipped: the answers are not the server's own predictions", async () => {
    const run = await probe(shipped, ['--checks', 'canary,non-interference', '--budget', '24', '--seed', '3']);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    const ni = resultOf(run.report, 'non-interference');
    expect(ni.status).toBe('finding');
    const consistency = ni.figures['selfConsistency'] as { kind: string; positions: number; agreement: number };
    expect(consistency).toMatchObject({ kind: 'measured', positions: 15 });
    expect(consistency.agreement).toBeLessThan(0.8);
    expect(ni.findings.map((f) => f.what).join('\n')).toMatch(/disagrees with the server's own next-token predictions/);
    expect(run.stdout).toMatch(/non-interference +FINDING/);
    expect(run.stdout).toMatch(/LEAK OR SIGNAL FOUND \(exit 1\)/);
    // Every request is in the JSON, the findings' requests among them.
    const ids = new Set(run.report.requests.map((r) => r.id));
    for (const id of ni.findings[0]?.requests ?? []) expect(ids.has(id)).toBe(true);
  });

  it("exits 1 on a batch-invariant cluster: B's greedy answer changes with what ran before it", async () => {
    const run = await probe(deterministic, [
      '--checks',
      'non-interference',
      '--batch-invariant',
      '--budget',
      '24',
      '--seed',
      '3',
    ]);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    const ni = resultOf(run.report, 'non-interference');
    expect(ni.status).toBe('finding');
    const changed = ni.figures['changed'] as Record<string, number>;
    expect(changed['alone'] + changed['amid-A'] + changed['amid-B']).toBeGreaterThan(0);
    expect(ni.findings.map((f) => f.what).join('\n')).toMatch(
      /differ from the lone reference on a batch-invariant server/,
    );
  });
});
