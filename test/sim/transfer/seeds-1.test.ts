// Shard 1 of 2 of the transfer simulation's CI seeds (see seeds.ts); the shards run in parallel.
import { describe, expect, it } from 'vitest';
import { FaultSet, isFaultName } from '../../../src/core/index.js';
import { describeSummary, runSeeds, shardSeeds } from './seeds.js';

const envFlag = (name: string): boolean | undefined =>
  process.env[name] === undefined || process.env[name] === '' ? undefined : process.env[name] === '1';
const faults = new FaultSet((process.env['SIM_FAULTS'] ?? '').split(',').filter(isFaultName));

describe('the transfer protocol under a hostile network, crashes, aborts and failures', () => {
  it('keeps every invariant, and conforms to the spec, on every seed of shard 1', () => {
    const summary = runSeeds(shardSeeds(0), {
      faults,
      conformance: faults.size === 0,
      chaos: envFlag('SIM_CHAOS'),
      badTags: envFlag('SIM_BAD_TAGS'),
      label: 'shard1',
    });
    console.log(describeSummary('shard 1', summary));
    expect(summary.seeds).toBeGreaterThan(0);
    expect(summary.failures).toEqual([]);
    if (faults.size === 0) expect(summary.conformanceChecked).toBe(summary.seeds);
  });
});
