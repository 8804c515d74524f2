// The incident's configuration, a pool smaller than the context (skip-startup-check lets such
// nodes start: 16 pages of 16 = 256 tokens under a 512-token context). With the pool-fit rule
// in force the probe learns the limit from the 400s and error-honesty is clean; with
// admit-over-pool the router serves an over-pool prompt truncated, with a 200, and
// error-honesty's tail test catches it (exit 1). Then: usage errors exit 2.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/process.js';
import { probe, resultOf, startCluster, type Cluster } from './support.js';

const SMALL_POOL = ['--kv-pages', '16', '--context-length', '512'];
let honest: Cluster;
let lying: Cluster;
beforeAll(async () => {
  [honest, lying] = await Promise.all([
    startCluster('up-small-pool', SMALL_POOL, 'skip-startup-check'),
    startCluster('up-admit-over-pool', SMALL_POOL, 'skip-startup-check,admit-over-pool'),
  ]);
});
afterAll(async () => Promise.all([honest?.stop(), lying?.stop()]));

describe('tessera probe error-honesty against a pool smaller than the context', () => {
  it(
    'with the pool-fit rule: learns the limit from the errors, every over-pool prompt gets a ' + '400, exit 0',
    async () => {
      const run = await probe(honest, ['--checks', 'error-honesty', '--seed', '2']);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.report.server).toMatchObject({ contextLength: 512, poolLimit: 256 });
      const eh = resultOf(run.report, 'error-honesty');
      expect(eh.status).toBe('clean');
      const cases = eh.figures['cases'] as { what: string; status: number }[];
      expect(cases.filter((c) => /pool limit/.test(c.what)).map((c) => c.status)).toEqual([400, 400]);
    },
  );

  it('with admit-over-pool: the over-pool prompt gets a 200 without its tail read; exit 1', async () => {
    const run = await probe(lying, ['--checks', 'error-honesty', '--seed', '2']);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    expect(run.report.server.poolLimit).toBeNull(); // the server never said no
    const eh = resultOf(run.report, 'error-honesty');
    expect(eh.status).toBe('finding');
    expect(eh.findings.map((f) => f.what).join('\n')).toMatch(/did not read the whole prompt/);
    expect(eh.figures['tail']).toMatchObject({ verdict: 'finding', long: { distinct: 1 } });
    expect(run.stdout).toMatch(/error-honesty +FINDING/);
  });

  it('exits 2 on usage errors and on an endpoint that does not answer', async () => {
    const one = await runCli(['probe', '--base-url', honest.url, '--api-key', 'key-alice'], honest.home);
    expect(one.code).toBe(2);
    expect(one.stderr).toMatch(/--api-key exactly twice/);
    const badCheck = await runCli(
      ['probe', '--base-url', honest.url, '--api-key', 'a', '--api-key', 'b', '--checks', 'telepathy'],
      honest.home,
    );
    expect(badCheck.code).toBe(2);
    expect(badCheck.stderr).toMatch(/unknown check "telepathy"/);
    const refused = await runCli(
      ['probe', '--base-url', 'http://127.0.0.1:1', '--api-key', 'a', '--api-key', 'b'],
      honest.home,
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/cannot reach/);
    const wrongKey = await runCli(
      ['probe', '--base-url', honest.url, '--api-key', 'nope', '--api-key', 'nope'],
      honest.home,
    );
    expect(wrongKey.code).toBe(2);
    expect(wrongKey.stderr).toMatch(/refused/);
  });
});
