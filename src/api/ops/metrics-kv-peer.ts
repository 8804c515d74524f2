// The cluster-wide prefix store's series (a prefill's holder and requester), read from its
// counters at scrape time (a MetricsHook):
//   tessera_kv_peer_fetches                 fetches this node asked of a peer
//   tessera_kv_peer_pages_fetched           pages accepted from a peer (every check passed)
//   tessera_kv_peer_pages_installed         of those, installed in the prefix cache
//   tessera_kv_peer_misses                  pages asked of a peer and not accepted (recomputed)
//   tessera_kv_peer_refused{reason}         fetches ended by a failed check (namespace, path, order, length,
//                                           checksum, timeout, closed), frames dropped as stale, and, as a
//                                           holder, fetches of a foreign namespace and reads of a changed page
//   tessera_kv_peer_pages_served            pages this node sent to peers under a lease
//   tessera_kv_peer_leases_open             leases open now (pinned pages)
//   tessera_kv_peer_leases_ended{how}       leases ended by their deadline or by the peer's close
// Structural: the store's stats shape (src/transfer's PeerStoreStats). Must never register into the global registry.
import { Gauge, type Registry } from 'prom-client';
import type { PeerStoreStats } from '../../transfer/index.js';

export function kvPeerMetrics(registry: Registry, read: () => PeerStoreStats | undefined): void {
  const registers = [registry];
  const gauge = (name: string, help: string, pick: (s: PeerStoreStats) => number): void =>
    void new Gauge({
      name,
      help,
      registers,
      collect() {
        const s = read();
        if (s !== undefined) this.set(pick(s));
      },
    });
  gauge('tessera_kv_peer_fetches', 'Prefix fetches this node asked of a peer.', (s) => s.requester.fetches);
  gauge(
    'tessera_kv_peer_pages_fetched',
    'KV pages accepted from a peer after every check.',
    (s) => s.requester.pagesFetched,
  );
  gauge('tessera_kv_peer_pages_installed', 'Fetched KV pages installed in the prefix cache.', (s) => s.pagesInstalled);
  gauge(
    'tessera_kv_peer_misses',
    'KV pages asked of a peer and not accepted (recomputed).',
    (s) => s.requester.pagesMissed,
  );
  gauge('tessera_kv_peer_pages_served', 'KV pages this node sent to peers under a lease.', (s) => s.holder.pagesServed);
  gauge('tessera_kv_peer_leases_open', 'Prefix leases open now (their pool pages pinned).', (s) => s.leasesOpen);
  new Gauge({
    name: 'tessera_kv_peer_refused',
    help: 'Prefix fetches ended by a failed check or a dropped frame, by reason (each a miss, never a read).',
    labelNames: ['reason'],
    registers,
    collect() {
      const s = read();
      if (s === undefined) return;
      for (const [reason, n] of Object.entries(s.requester.refused)) this.set({ reason }, n);
      this.set({ reason: 'foreign-namespace' }, s.holder.refusedNamespace);
      this.set({ reason: 'page-changed' }, s.holder.pagesChanged);
    },
  });
  new Gauge({
    name: 'tessera_kv_peer_leases_ended',
    help: 'Prefix leases ended other than by their done: by the deadline or by the peer closing.',
    labelNames: ['how'],
    registers,
    collect() {
      const s = read();
      if (s === undefined) return;
      this.set({ how: 'deadline' }, s.holder.leasesExpired);
      this.set({ how: 'closed' }, s.holder.leasesClosed);
    },
  });
}
