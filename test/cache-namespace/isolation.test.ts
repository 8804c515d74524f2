// Every registered cache (src/core/cache-registry.ts), probed through its public API with two
// tenants and the same input (probes.ts): tenant A's own lookup finds A's entry (the probe reaches
// the cache), tenant B's does not. Negative controls: with each fault point the registry names for
// a cache (the namespace dropped from its key), the same probe sees B observe A's entry, so the
// isolation assertion above fails under it.
import { describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS } from '../../src/core/index.js';
import { CACHES } from '../../src/core/cache-registry.js';
import { PROBES, type Probe } from './probes.js';

const probeOf = (name: string): Probe => {
  const probe = PROBES[name];
  if (probe === undefined) throw new Error(`no probe for the cache ${name}`);
  return probe;
};

describe('tenant B cannot observe tenant A’s entry', () => {
  it.each(CACHES.map((c) => c.name))('in the %s', async (name) => {
    expect(await probeOf(name)(NO_FAULTS)).toEqual({ ownHit: true, otherHit: false });
  });
});

describe('negative controls: with the namespace dropped from the key, B observes it', () => {
  it.each(CACHES.flatMap((c) => c.faults.map((fault) => [c.name, fault] as const)))(
    'in the %s under %s',
    async (name, fault) => {
      expect((await probeOf(name)(new FaultSet([fault]))).otherHit).toBe(true);
    },
  );
});
