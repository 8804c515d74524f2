import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, type Tag } from '../core/index.js';
import type { KvEvent } from './kv-events.js';
import type { Owner } from './page-entry.js';
import { PagePool } from './pool.js';
import { PrefixCache } from './prefix-cache.js';
import { PrefixHasher } from './prefix-hash.js';

const PAGE_SIZE = 4;
const owner = (rid: string, tenant: string): Owner => ({ rid: asRequestId(rid), tenant: asTenantId(tenant) });
/** Token ids no hash or tag can contain by chance as a JSON number: 5 digits each. */
const TOKENS = Array.from({ length: 9 }, (_, i) => 40_001 + i);

function setup(): { pool: PagePool; cache: PrefixCache; events: KvEvent[]; hasher: PrefixHasher } {
  const pool = PagePool.create({ numPages: 4, pageSize: PAGE_SIZE, numLayers: 1, numKvHeads: 1, headDim: 1 });
  const events: KvEvent[] = [];
  const hasher = new PrefixHasher('cluster-secret');
  return { pool, cache: new PrefixCache({ pool, events: { hasher, publish: (e) => events.push(e) } }), events, hasher };
}

/** Computes and caches tokens for who (every page written and stamped). */
function serve(pool: PagePool, cache: PrefixCache, who: Owner, tokens: readonly number[]): void {
  const result = cache.allocate(Math.ceil(tokens.length / PAGE_SIZE), who);
  if (result.kind !== 'allocated') throw new Error('out of pages');
  result.tags.forEach((tag: Tag, i) => pool.stamp(tag, Math.min(PAGE_SIZE, tokens.length - i * PAGE_SIZE)));
  cache.insert(who, tokens, result.tags);
}

describe('KV events of the prefix cache', () => {
  it('publish BlockStored per cached page, chained by the keyed block hashes a router computes', () => {
    const { pool, cache, events, hasher } = setup();
    serve(pool, cache, owner('a', 'alice'), TOKENS);
    const tag = hasher.tenantTag('alice');
    const [h0, h1] = hasher.blockHashes(tag, TOKENS, PAGE_SIZE);
    expect(events).toEqual([
      { type: 'BlockStored', tenant: tag, blockHash: h0, parentHash: null, adapterDigest: null },
      { type: 'BlockStored', tenant: tag, blockHash: h1, parentHash: h0, adapterDigest: null },
    ]);
  });

  it('publish BlockRemoved per evicted page, leaf first', () => {
    const { pool, cache, events, hasher } = setup();
    serve(pool, cache, owner('a', 'alice'), TOKENS);
    events.length = 0;
    cache.evict(2);
    const tag = hasher.tenantTag('alice');
    const [h0, h1] = hasher.blockHashes(tag, TOKENS, PAGE_SIZE);
    expect(events).toEqual([
      { type: 'BlockRemoved', tenant: tag, blockHash: h1 },
      { type: 'BlockRemoved', tenant: tag, blockHash: h0 },
    ]);
  });

  it("carry neither a token id nor the tenant's name", () => {
    const { pool, cache, events } = setup();
    serve(pool, cache, owner('a', 'alice'), TOKENS);
    cache.evict(2);
    const text = JSON.stringify(events);
    expect(events).toHaveLength(4);
    for (const token of TOKENS) expect(text).not.toContain(String(token));
    expect(text).not.toContain('alice');
  });
});
