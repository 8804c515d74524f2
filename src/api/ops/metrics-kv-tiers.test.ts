// /metrics with kvTierMetrics: one series per tier (pool, disk, peer) of pages, hits and misses,
// refusals by tier and reason, read at scrape time; a node with fewer tiers has fewer series.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TierView } from '../../core/index.js';
import { kvTierMetrics } from './metrics-kv-tiers.js';
import { send, seriesValue, startTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;
let tiers: TierView[] = [];
beforeAll(async () => {
  t = await startTestServer({ metricsHooks: [(registry) => kvTierMetrics(registry, () => tiers)] });
});
afterAll(() => t.close());

describe('the tier series of /metrics', () => {
  it('show each tier the node has, as it is at scrape time', async () => {
    tiers = [{ name: 'pool', pages: 4, hits: 2, misses: 4, refused: {} }];
    const before = (await send(t.url, 'GET', '/metrics')).text;
    expect(seriesValue(before, 'tessera_kv_tier_pages{tier="pool"}')).toBe(4);
    expect(before).not.toContain('tier="disk"');
    tiers = [
      { name: 'pool', pages: 5, hits: 7, misses: 9, refused: {} },
      { name: 'disk', pages: 40, hits: 6, misses: 3, refused: { checksum: 2, namespace: 1 } },
      { name: 'peer', pages: 8, hits: 8, misses: 0, refused: { epoch: 1 } },
    ];
    const text = (await send(t.url, 'GET', '/metrics')).text;
    expect(seriesValue(text, 'tessera_kv_tier_pages{tier="pool"}')).toBe(5);
    expect(seriesValue(text, 'tessera_kv_tier_hits{tier="pool"}')).toBe(7);
    expect(seriesValue(text, 'tessera_kv_tier_misses{tier="pool"}')).toBe(9);
    expect(seriesValue(text, 'tessera_kv_tier_pages{tier="disk"}')).toBe(40);
    expect(seriesValue(text, 'tessera_kv_tier_hits{tier="disk"}')).toBe(6);
    expect(seriesValue(text, 'tessera_kv_tier_misses{tier="disk"}')).toBe(3);
    expect(seriesValue(text, 'tessera_kv_tier_refused{tier="disk",reason="checksum"}')).toBe(2);
    expect(seriesValue(text, 'tessera_kv_tier_refused{tier="disk",reason="namespace"}')).toBe(1);
    expect(seriesValue(text, 'tessera_kv_tier_hits{tier="peer"}')).toBe(8);
    expect(seriesValue(text, 'tessera_kv_tier_refused{tier="peer",reason="epoch"}')).toBe(1);
  });
});
