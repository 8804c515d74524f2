// CountedPrefixCache and tiersOf: a match asks the pool for every full page, then the disk for the
// rest; each tier counts the pages it gave (hits) and the pages asked of it that it did not
// (misses); the disk tier shows its stored pages and refusals by reason; a peer tier set for the
// same pool comes after them; a pool nothing keeps a tier over has none.
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, type Tag } from '../core/index.js';
import {
  PagePool,
  pagesFor,
  type Owner,
  type SpillLoad,
  type SpillNamespace,
  type SpillStats,
  type SpillStore,
} from '../pages/index.js';
import { CountedPrefixCache, setTierSource, tiersOf } from './tier-views.js';

const PAGE_SIZE = 4;
const owner = (rid: string, tenant: string): Owner => ({ rid: asRequestId(rid), tenant: asTenantId(tenant) });
/** Two full pages and one token: a match asks for two pages. */
const PROMPT = Array.from({ length: 9 }, (_, i) => 100 + i);

/** An in-memory spill store that can be told to refuse its next load. */
class MemoryStore implements SpillStore {
  readonly pages = new Map<string, Uint8Array>();
  refuseNext = false;
  #loaded = 0;
  #misses = 0;
  #refusedChecksum = 0;

  has(namespace: SpillNamespace, pathHash: string): boolean {
    return this.pages.has(`${namespace}|${pathHash}`);
  }

  put(namespace: SpillNamespace, pathHash: string, numBytes: number, fill: (into: Uint8Array) => void): void {
    const bytes = new Uint8Array(numBytes);
    fill(bytes);
    this.pages.set(`${namespace}|${pathHash}`, bytes);
  }

  get(namespace: SpillNamespace, pathHash: string): SpillLoad {
    const bytes = this.pages.get(`${namespace}|${pathHash}`);
    if (bytes === undefined) {
      this.#misses++;
      return { kind: 'absent' };
    }
    if (this.refuseNext) {
      this.refuseNext = false;
      this.#refusedChecksum++;
      return { kind: 'refused', reason: 'checksum' };
    }
    this.#loaded++;
    return { kind: 'hit', bytes };
  }

  stats(): SpillStats {
    return {
      spilledPages: this.pages.size,
      loadedPages: this.#loaded,
      misses: this.#misses,
      refused: { namespace: 0, path: 0, checksum: this.#refusedChecksum, length: 0, header: 0, io: 0 },
      numPages: this.pages.size,
      bytesOnDisk: 0,
      pendingWrites: 0,
    };
  }
}

function setup(withDisk: boolean): { pool: PagePool; cache: CountedPrefixCache; store: MemoryStore } {
  const pool = PagePool.create({ numPages: 6, pageSize: PAGE_SIZE, numLayers: 1, numKvHeads: 1, headDim: 1 });
  const store = new MemoryStore();
  const spill = withDisk ? { spill: { store, model: 'm' } } : {};
  return { pool, store, cache: new CountedPrefixCache({ pool, ...spill }) };
}

/** One request as the scheduler runs it: match, allocate the rest, write and stamp, insert. */
function serve(pool: PagePool, cache: CountedPrefixCache, who: Owner, tokens: readonly number[]): void {
  const hit = cache.match(who, tokens.slice(0, -1));
  const result = cache.allocate(pagesFor(tokens.length, PAGE_SIZE) - hit.tags.length, who);
  if (result.kind !== 'allocated') throw new Error('out of pages');
  const table = [...hit.tags, ...result.tags];
  for (let i = hit.tags.length; i < table.length; i++)
    pool.stamp(table[i] as Tag, Math.min(PAGE_SIZE, tokens.length - i * PAGE_SIZE));
  cache.insert(who, tokens, table);
}

describe('the tiers of a prefix cache', () => {
  it('count what the pool gave and did not, per page asked', () => {
    const { pool, cache } = setup(false);
    serve(pool, cache, owner('r1', 'acme'), PROMPT); // asks 2, pool has none
    serve(pool, cache, owner('r2', 'acme'), PROMPT); // asks 2, pool gives 2
    serve(pool, cache, owner('r3', 'globex'), PROMPT); // another tenant: the pool gives none
    expect(cache.tiers()).toEqual([{ name: 'pool', pages: 4, hits: 2, misses: 4, refused: {} }]);
  });

  it('count what the disk gave of what the pool lacked, and its refusals by reason', () => {
    const { pool, cache, store } = setup(true);
    serve(pool, cache, owner('r1', 'acme'), PROMPT); // pool 0/2, disk 0/2
    cache.evict(2); // both pages spill
    serve(pool, cache, owner('r2', 'acme'), PROMPT); // pool 0/2, disk 2/2
    cache.evict(2);
    store.refuseNext = true;
    serve(pool, cache, owner('r3', 'acme'), PROMPT); // pool 0/2, disk refuses the first: 0/2
    const [poolTier, diskTier] = cache.tiers();
    expect(poolTier).toEqual({ name: 'pool', pages: 2, hits: 0, misses: 6, refused: {} });
    expect(diskTier).toMatchObject({ name: 'disk', pages: 2, hits: 2, misses: 4 });
    expect(diskTier?.refused).toMatchObject({ checksum: 1, namespace: 0 });
  });

  it("tiersOf: a pool's sources in the order set, a source set again replaced; none for a bare pool", () => {
    const { pool, cache } = setup(false);
    expect(tiersOf(pool)).toBeUndefined();
    setTierSource(pool, 'prefix-cache', () => cache.tiers());
    const peer = { name: 'peer' as const, pages: 3, hits: 3, misses: 1, refused: { checksum: 1 } };
    setTierSource(pool, 'peer', () => [{ ...peer, hits: 0 }]);
    setTierSource(pool, 'peer', () => [peer]);
    expect(tiersOf(pool)?.map((t) => t.name)).toEqual(['pool', 'peer']);
    expect(tiersOf(pool)?.[1]).toEqual(peer);
  });
});
