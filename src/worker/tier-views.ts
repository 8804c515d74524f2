// The cache tiers of a worker as the dashboard and /metrics show them (src/core's TierView):
//   pool  the prefix cache's own pages: pages cached now, pages a match found in the pool, pages it did not
//   disk  the spill tier under it (--kv-disk): pages stored, pages loaded back, pages the pool lacked that
//         it did not give (absent or refused), refusals by reason (its SpillStats)
//   peer  (the cluster-wide store) whatever source is added for the pool with addTierSource
// A match asks the pool for every full page of the prompt, then the disk for the rest, in order:
// each tier's misses are the pages asked of it that it did not give. A request that waits for
// pages is matched again at each step, and each match counts (as the prefix cache's hit rate does).
// Owns: the counts of CountedPrefixCache and which pool's tiers are whose. Must never count a
// page twice in one match, read a tier's contents, or name a tenant.
import type { TierView } from '../core/index.js';
import { PrefixCache, type Owner, type PagePool, type PrefixCacheOptions, type PrefixMatch } from '../pages/index.js';

/** A prefix cache that counts, per match, the pages its pool and its disk tier gave. */
export class CountedPrefixCache extends PrefixCache {
  readonly #pageSize: number;
  readonly #disk: PrefixCacheOptions['spill'];
  #poolHits = 0;
  #poolMisses = 0;
  #diskHits = 0;
  #diskMisses = 0;

  constructor(options: PrefixCacheOptions) {
    super(options);
    this.#pageSize = options.pool.pageSize;
    this.#disk = options.spill;
  }

  override match(reader: Owner, tokens: readonly number[]): PrefixMatch {
    const loadedBefore = this.#disk?.store.stats().loadedPages ?? 0;
    const found = super.match(reader, tokens);
    const asked = Math.floor(tokens.length / this.#pageSize);
    const fromDisk = (this.#disk?.store.stats().loadedPages ?? 0) - loadedBefore;
    const fromPool = found.tags.length - fromDisk;
    this.#poolHits += fromPool;
    this.#poolMisses += asked - fromPool;
    if (this.#disk !== undefined) {
      this.#diskHits += fromDisk;
      this.#diskMisses += asked - fromPool - fromDisk;
    }
    return found;
  }

  /** The pool's tier and, with a spill store, the disk's. */
  tiers(): TierView[] {
    const pool: TierView = {
      name: 'pool',
      pages: this.numPages,
      hits: this.#poolHits,
      misses: this.#poolMisses,
      refused: {},
    };
    if (this.#disk === undefined) return [pool];
    const s = this.#disk.store.stats();
    return [
      pool,
      { name: 'disk', pages: s.numPages, hits: this.#diskHits, misses: this.#diskMisses, refused: s.refused },
    ];
  }
}

type TierSource = () => readonly TierView[];
/** Each pool's tier sources by name, in the order first set (weakly held: a pool's tiers go with it). */
const SOURCES = new WeakMap<PagePool, Map<string, TierSource>>();

/**
 * Sets the source `name` of what tiersOf(pool) answers (schedulerFor: 'prefix-cache', the pool and
 * disk tiers; the cluster-wide store: its 'peer' tier). Setting a name again replaces its source.
 */
export function setTierSource(pool: PagePool, name: string, source: TierSource): void {
  let sources = SOURCES.get(pool);
  if (sources === undefined) SOURCES.set(pool, (sources = new Map()));
  sources.set(name, source);
}

/** The pool's tiers, in lookup order; undefined when nothing keeps a tier over it (a decode's pool). */
export function tiersOf(pool: PagePool): TierView[] | undefined {
  const sources = SOURCES.get(pool);
  return sources === undefined ? undefined : [...sources.values()].flatMap((source) => source());
}
