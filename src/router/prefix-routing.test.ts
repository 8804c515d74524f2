import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, samplingParams } from '../core/index.js';
import { PrefixHasher } from '../pages/index.js';
import { ALL_CHECKS } from './pair-policy.js';
import { parsePrefixReport } from './prefix-index.js';
import { PrefixRouting } from './prefix-routing.js';
import { WorkerRegistry } from './workers.js';

const hasher = new PrefixHasher('cluster-secret-0123456789abcdef');
const PROMPT = Array.from({ length: 100 }, (_, i) => 7 + i);
const LIMITS = {
  contextLength: 1024,
  pageSize: 16,
  numPages: 64,
  kvBytesPerToken: 8,
  kvDtype: 'f32' as const,
  model: 'm',
};

/** Two prefills (p1 holds tenant t's prefix) and one decode, all up; in-flight counts per address. */
function cluster(load: Record<string, number>, acrossTenants = false): PrefixRouting {
  const registry = new WorkerRegistry({
    prefills: ['http://p1', 'http://p2'],
    decodes: ['http://d1'],
    pollIntervalMs: 60_000,
    fetchTimeoutMs: 1000,
    inFlightOn: (address) => load[address] ?? 0,
  });
  for (const e of registry.entries) {
    e.state = 'up';
    e.address = `${e.url.slice('http://'.length)}:1`;
    e.limits = LIMITS;
    e.admitted = true;
  }
  const p1 = registry.entries.find((e) => e.url === 'http://p1');
  if (p1 === undefined) throw new Error('no p1');
  p1.prefix = parsePrefixReport({
    lookupTokens: 0,
    hitTokens: 0,
    tenants: { [hasher.tenantTag('t')]: hasher.blockHashes(hasher.tenantTag('t'), PROMPT, 16) },
  });
  return new PrefixRouting(registry, ALL_CHECKS, 'prefix', hasher, acrossTenants);
}

const request = (rid: string, tenant: string) => ({
  rid: asRequestId(rid),
  tenant: asTenantId(tenant),
  tokens: PROMPT,
  sampling: samplingParams({ maxTokens: 1 }),
});

describe('PrefixRouting hints', () => {
  it('routes to the holder by prefix within the load bound, with no hint', () => {
    const routing = cluster({});
    expect(routing.pick(request('r1', 't'), { prefills: [] })?.prefill).toBe('p1:1');
    expect(routing.takeHint(asRequestId('r1'), 'p1:1')).toBeUndefined();
  });

  it('hints the holder when the load bound sends the request to another prefill, once, for that prefill only', () => {
    const routing = cluster({ 'p1:1': 1 });
    expect(routing.pick(request('r1', 't'), { prefills: [] })?.prefill).toBe('p2:1');
    expect(routing.report()).toMatchObject({ hinted: 1, loadReasons: { bound: 1 } });
    expect(routing.takeHint(asRequestId('r1'), 'p1:1')).toBeUndefined();
    routing.pick(request('r2', 't'), { prefills: [] });
    expect(routing.takeHint(asRequestId('r2'), 'p2:1')).toBe('p1:1');
    expect(routing.takeHint(asRequestId('r2'), 'p2:1')).toBeUndefined();
  });

  it("never hints another tenant's holder: the same tokens of tenant u go by load with no hint", () => {
    const routing = cluster({ 'p1:1': 1 });
    expect(routing.pick(request('r1', 'u'), { prefills: [] })?.prefill).toBe('p2:1');
    expect(routing.takeHint(asRequestId('r1'), 'p2:1')).toBeUndefined();
    expect(routing.report()).toMatchObject({ hinted: 0, loadReasons: { 'no-match': 1 } });
  });

  it("hints tenant t's holder to tenant u under share-prefix-index-across-tenants (the negative control; the holder still refuses u's namespace)", () => {
    const routing = cluster({ 'p1:1': 1 }, true);
    routing.pick(request('r1', 'u'), { prefills: [] });
    expect(routing.takeHint(asRequestId('r1'), 'p2:1')).toBe('p1:1');
  });
});
