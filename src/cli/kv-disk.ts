// --kv-disk at start-up: opens the disk tier (scanning its directory), names the model it
// spills for, and gives the worker its spill and the API server its metrics.
// Must never: open a tier without the model's fingerprint (pages of another model must never
// match), or let a stop lose a page a write has started (close waits for the writes). At a stop,
// what the pool still caches is spilled too, so a restart finds the hot prefixes as well.
// With a hasher (a prefill: the cluster secret's), each page's file records its keyed tenant tag and
// block hash, so a restarted prefill reports the pages it finds on disk to the router.
import type { MetricsHook } from '../api/index.js';
import { kvDiskMetrics } from '../api/index.js';
import type { FaultSet } from '../core/index.js';
import type { KvSpill, PrefixCache, PrefixHasher } from '../pages/index.js';
import { DiskTier } from '../worker/index.js';
import type { KvDiskConfig } from './config.js';
import { formatBytes } from './config-values.js';

/** At a stop, the most passes of spilling what the pool caches (each up to the tier's pending bound). */
const MAX_CLOSE_PASSES = 32;

export interface KvDisk {
  /** For the worker's options: spread into them (empty without --kv-disk). */
  readonly spill: { readonly kvSpill?: KvSpill };
  readonly metricsHooks: readonly MetricsHook[];
  /** After the worker stopped: spills what its prefix cache still holds, and waits for every write. */
  close(cache: PrefixCache | undefined): Promise<void>;
}

export function openKvDisk(
  config: KvDiskConfig | null,
  fingerprint: string,
  faults: FaultSet,
  log: (line: string) => void,
  hasher?: PrefixHasher,
): KvDisk {
  if (config === null) return { spill: {}, metricsHooks: [], close: () => Promise.resolve() };
  // (the pool's pages are read at close, after the worker stopped: no step is in flight then)
  const tier = DiskTier.open({ dir: config.dir, maxBytes: config.maxBytes, faults, log });
  const { numPages, bytesOnDisk } = tier.stats();
  log(
    `kv-disk: ${config.dir}, ${numPages} pages (${formatBytes(bytesOnDisk)}) of at most ${formatBytes(config.maxBytes)}`,
  );
  return {
    spill: { kvSpill: { store: tier, model: fingerprint, ...(hasher === undefined ? {} : { hasher }) } },
    metricsHooks: [(registry) => kvDiskMetrics(registry, () => tier.stats())],
    close: async (cache) => {
      await tier.flush();
      if (cache === undefined) return;
      // Puts beyond the pending bound are dropped: write in passes until a pass adds nothing
      // (bounded, in case the directory's size bound deletes what a pass wrote).
      const before = tier.stats().spilledPages;
      for (let pass = 0; pass < MAX_CLOSE_PASSES; pass++) {
        const spilled = tier.stats().spilledPages;
        cache.spillAll();
        await tier.flush();
        if (tier.stats().spilledPages === spilled) break;
      }
      log(`kv-disk: wrote ${tier.stats().spilledPages - before} cached pages at the stop`);
    },
  };
}
