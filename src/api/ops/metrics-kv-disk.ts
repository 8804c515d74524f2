// The disk tier's series, read from its counters at scrape time (a MetricsHook):
//   tessera_kv_disk_pages_spilled        pages evicted from the pool and kept on disk
//   tessera_kv_disk_pages_loaded         pages loaded back (prefix-cache hits from disk)
//   tessera_kv_disk_misses               loads that found nothing
//   tessera_kv_disk_refused_loads{reason} loads refused by a check (namespace, path, checksum, length, header, io)
//   tessera_kv_disk_pages, tessera_kv_disk_bytes, tessera_kv_disk_pending_writes
// Structural: the tier's stats shape (src/pages' SpillStats). Must never register into the global registry.
import { Gauge, type Registry } from 'prom-client';
import type { SpillStats } from '../../pages/index.js';

export function kvDiskMetrics(registry: Registry, read: () => SpillStats): void {
  const registers = [registry];
  const gauge = (name: string, help: string, pick: (s: SpillStats) => number): void =>
    void new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(pick(read()));
      },
    });
  gauge(
    'tessera_kv_disk_pages_spilled',
    'KV pages evicted from the pool and kept by the disk tier.',
    (s) => s.spilledPages,
  );
  gauge(
    'tessera_kv_disk_pages_loaded',
    'KV pages the prefix cache loaded back from the disk tier.',
    (s) => s.loadedPages,
  );
  gauge('tessera_kv_disk_misses', 'Disk-tier loads that found no page.', (s) => s.misses);
  gauge('tessera_kv_disk_pages', 'KV pages in the disk tier (written or waiting to be).', (s) => s.numPages);
  gauge('tessera_kv_disk_bytes', 'Bytes of the disk tier on disk.', (s) => s.bytesOnDisk);
  gauge('tessera_kv_disk_pending_writes', 'Spilled pages not yet written.', (s) => s.pendingWrites);
  new Gauge({
    name: 'tessera_kv_disk_refused_loads',
    help: 'Disk-tier loads refused by a check, by reason (each a miss, never a read).',
    labelNames: ['reason'],
    registers,
    collect() {
      for (const [reason, n] of Object.entries(read().refused)) this.set({ reason }, n);
    },
  });
}
