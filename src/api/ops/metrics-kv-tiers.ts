// Each cache tier of a node (src/core's TierView: pool, disk, peer), read at scrape time (a MetricsHook):
//   tessera_kv_tier_pages{tier}            pages the tier holds now
//   tessera_kv_tier_hits{tier}             pages a prefix match got from the tier, since the start
//   tessera_kv_tier_misses{tier}           pages a match asked of the tier that it did not give
//   tessera_kv_tier_refused{tier,reason}   loads the tier refused by a check (each also a miss)
// One family per figure, one label per tier, so a node's tiers sit side by side whatever it has
// (metrics-kv-disk.ts keeps the disk tier's own series; metrics-kv-peer.ts the peer store's).
// Structural: the tiers come from a reader (src/worker's tiersOf). Must never name a tenant or
// register into the global registry.
import { Gauge, type Registry } from 'prom-client';
import type { TierView } from '../../core/index.js';

export function kvTierMetrics(registry: Registry, read: () => readonly TierView[]): void {
  const registers = [registry];
  const family = (name: string, help: string, pick: (t: TierView) => number): void =>
    void new Gauge({
      name,
      help,
      labelNames: ['tier'],
      registers,
      collect() {
        this.reset(); // a tier gone since the last scrape leaves no series behind
        for (const tier of read()) this.set({ tier: tier.name }, pick(tier));
      },
    });
  family('tessera_kv_tier_pages', 'KV pages each cache tier holds (pool, disk, peer).', (t) => t.pages);
  family('tessera_kv_tier_hits', 'Pages prefix matches got from each cache tier.', (t) => t.hits);
  family(
    'tessera_kv_tier_misses',
    'Pages prefix matches asked of each cache tier that it did not give.',
    (t) => t.misses,
  );
  new Gauge({
    name: 'tessera_kv_tier_refused',
    help: 'Loads each cache tier refused by a check, by reason (each a miss, never a read).',
    labelNames: ['tier', 'reason'],
    registers,
    collect() {
      this.reset();
      for (const tier of read())
        for (const [reason, n] of Object.entries(tier.refused)) this.set({ tier: tier.name, reason }, n);
    },
  });
}
