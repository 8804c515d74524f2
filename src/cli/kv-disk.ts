// --kv-disk at start-up: opens the disk tier (scanning its directory), names the model it
// spills for, and gives the worker its spill and the API server its metrics.
// Must never: open a tier without the model's fingerprint (pages of another model must never
// match), or let a stop lose a page a write has started (close waits for the writes).
import type { MetricsHook } from '../api/index.js';
import { kvDiskMetrics } from '../api/index.js';
import type { FaultSet } from '../core/index.js';
import type { KvSpill } from '../pages/index.js';
import { DiskTier } from '../worker/index.js';
import type { KvDiskConfig } from './config.js';
import { formatBytes } from './config-values.js';

export interface KvDisk {
  /** For the worker's options: spread into them (empty without --kv-disk). */
  readonly spill: { readonly kvSpill?: KvSpill };
  readonly metricsHooks: readonly MetricsHook[];
  close(): Promise<void>;
}

export function openKvDisk(
  config: KvDiskConfig | null,
  fingerprint: string,
  faults: FaultSet,
  log: (line: string) => void,
): KvDisk {
  if (config === null) return { spill: {}, metricsHooks: [], close: () => Promise.resolve() };
  const tier = DiskTier.open({ dir: config.dir, maxBytes: config.maxBytes, faults, log });
  const { numPages, bytesOnDisk } = tier.stats();
  log(
    `kv-disk: ${config.dir}, ${numPages} pages (${formatBytes(bytesOnDisk)}) of at most ${formatBytes(config.maxBytes)}`,
  );
  return {
    spill: { kvSpill: { store: tier, model: fingerprint } },
    metricsHooks: [(registry) => kvDiskMetrics(registry, () => tier.stats())],
    close: () => tier.flush(),
  };
}
