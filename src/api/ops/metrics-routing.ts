// The router's routing series, read from its routing report at scrape time (a MetricsHook):
//   tessera_router_routed_requests{by="prefix"|"load"}   requests routed by prefix vs by load
//   tessera_prefix_cache_hit_ratio{worker}               each prefill's hit rate as it reports it
//   tessera_prefix_cache_lookup_tokens{worker}, tessera_prefix_cache_hit_tokens{worker}
// Structural: the router's report shape, so src/api imports nothing of src/router's internals.
// Must never register into the global registry.
import { Gauge, type Registry } from 'prom-client';

export interface RoutingSnapshot {
  readonly byPrefix: number;
  readonly byLoad: number;
  readonly workers: readonly {
    readonly url: string;
    readonly lookupTokens: number;
    readonly hitTokens: number;
    readonly hitRate: number;
  }[];
}

export function routingMetrics(registry: Registry, read: () => RoutingSnapshot): void {
  const registers = [registry];
  new Gauge({
    name: 'tessera_router_routed_requests',
    help: 'Requests the router routed, by prefix-cache match or by load.',
    labelNames: ['by'],
    registers,
    collect() {
      const r = read();
      this.set({ by: 'prefix' }, r.byPrefix);
      this.set({ by: 'load' }, r.byLoad);
    },
  });
  const perWorker = (name: string, help: string, pick: (w: RoutingSnapshot['workers'][number]) => number): void =>
    void new Gauge({
      name,
      help,
      labelNames: ['worker'],
      registers,
      collect() {
        this.reset();
        for (const w of read().workers) this.set({ worker: w.url }, pick(w));
      },
    });
  perWorker(
    'tessera_prefix_cache_hit_ratio',
    'Prompt tokens a prefill found in its prefix cache / tokens it looked up.',
    (w) => w.hitRate,
  );
  perWorker(
    'tessera_prefix_cache_lookup_tokens',
    'Prompt tokens a prefill looked up in its prefix cache.',
    (w) => w.lookupTokens,
  );
  perWorker(
    'tessera_prefix_cache_hit_tokens',
    'Prompt tokens a prefill found in its prefix cache.',
    (w) => w.hitTokens,
  );
}
