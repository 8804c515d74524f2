// The PD router's extra series, registered through the server's MetricsHook:
//   createApiServer({ ..., metricsHooks: [(registry) => router.attachMetrics(pdMetrics(registry))] })
// The router and the PD workers code against core's PdMetricsSink (they cannot import src/api),
// so metric names live here with the others. Must never register into the global registry.
import { Counter, Histogram, type Registry } from 'prom-client';
import type { PdMetricsSink } from '../../core/index.js';

export type PdMetrics = PdMetricsSink;

const TRANSFER_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export function pdMetrics(registry: Registry): PdMetrics {
  const registers = [registry];
  const bytes = new Counter({
    name: 'tessera_kv_transfer_bytes_total',
    help: 'KV bytes moved from prefill to decode workers.',
    registers,
  });
  const seconds = new Histogram({
    name: 'tessera_kv_transfer_seconds',
    help: 'Duration of one whole KV transfer.',
    buckets: TRANSFER_BUCKETS,
    registers,
  });
  const checksums = new Counter({
    name: 'tessera_kv_transfer_checksum_failures_total',
    help: 'KV frames refused for a bad checksum or digest.',
    registers,
  });
  const aborts = new Counter({
    name: 'tessera_aborts_total',
    help: 'Aborted requests by protocol phase.',
    labelNames: ['phase'],
    registers,
  });
  const waits = new Histogram({
    name: 'tessera_router_queue_wait_seconds',
    help: 'Time a request waited for a free slot or KV pages on the cluster.',
    buckets: TRANSFER_BUCKETS,
    registers,
  });
  bytes.inc(0);
  checksums.inc(0);
  return {
    addTransferBytes: (numBytes) => bytes.inc(numBytes),
    observeTransferSeconds: (s) => seconds.observe(s),
    countChecksumFailure: () => checksums.inc(),
    countAbort: (phase) => aborts.inc({ phase }),
    observeQueueWaitSeconds: (s) => waits.observe(s),
  };
}
