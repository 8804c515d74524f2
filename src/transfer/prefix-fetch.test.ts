import { xxh64 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import {
  asRequestId,
  asTenantId,
  FaultSet,
  kvTenantOf,
  NO_FAULTS,
  type FaultSet as Faults,
  type Tag,
} from '../core/index.js';
import {
  PagePool,
  pagesFor,
  PrefixCache,
  PrefixHasher,
  type Owner,
  type SpillLoad,
  type SpillNamespace,
  type SpillStats,
  type SpillStore,
} from '../pages/index.js';
import { decodeClusterFrame, encodeFrame } from './codec.js';
import type { PrefixMessage, PrefixPages } from './prefix-fetch-messages.js';
import { PrefixRequester } from './prefix-fetch-requester.js';
import { PeerPrefixStore } from './prefix-fetch-store.js';
import { MemoryNetwork } from './transports/memory.js';
import { SECRET } from './transports/testing/harness.js';

const PAGE = 4;
const schedule = (fn: () => void, ms: number): (() => void) => {
  const timer = setTimeout(fn, ms);
  return () => clearTimeout(timer);
};
const MODEL = '0123456789abcdef';
const owner = (rid: string, tenant: string): Owner => ({ rid: asRequestId(rid), tenant: asTenantId(tenant) });
const T1 = asTenantId('t1');
const T2 = asTenantId('t2');
/** 13 tokens: the prefix match() looks up is the first 12 = 3 full pages. */
const PROMPT = Array.from({ length: 13 }, (_, i) => 100 + i);

interface Node {
  readonly pool: PagePool;
  readonly cache: PrefixCache;
}

function node(spill?: SpillStore): Node {
  const pool = PagePool.create({ numPages: 8, pageSize: PAGE, numLayers: 1, numKvHeads: 1, headDim: 2 });
  return {
    pool,
    cache: new PrefixCache({ pool, ...(spill === undefined ? {} : { spill: { store: spill, model: MODEL } }) }),
  };
}

/** Page i of a request seeded `seed`: distinct bytes per seed and page. */
function content(n: Node, seed: number, i: number): Uint8Array {
  const bytes = new Uint8Array(n.pool.slotRangeBytes(PAGE));
  for (let j = 0; j < bytes.length; j++) bytes[j] = (seed * 31 + i * 7 + j) & 255;
  return bytes;
}

/** A request computed and finished: its full pages cached, written with content(seed, page). */
function serve(n: Node, who: Owner, tokens: readonly number[], seed: number): void {
  const hit = n.cache.match(who, tokens.slice(0, -1));
  const result = n.cache.allocate(pagesFor(tokens.length, PAGE) - hit.tags.length, who);
  if (result.kind !== 'allocated') throw new Error('out of pages');
  const table = [...hit.tags, ...result.tags];
  for (let i = hit.tags.length; i < table.length; i++) {
    const tag = table[i] as Tag;
    n.pool.checkWrite(who, [tag]);
    n.pool.scatterSlots(tag.page, 0, PAGE, content(n, seed, i));
    n.pool.stamp(tag, Math.max(0, Math.min(PAGE, tokens.length - i * PAGE)));
  }
  n.cache.insert(who, tokens, table);
}

/** What match() finds for who: how many pages, and whether their bytes are content(seed, i). */
function matched(
  n: Node,
  who: Owner,
  tokens: readonly number[],
  seed: number,
): { pages: number; bytesAreSeed: boolean } {
  const hit = n.cache.match(who, tokens.slice(0, -1));
  const bytesAreSeed = hit.tags.every(
    (tag, i) => Buffer.compare(n.pool.gatherSlots(tag.page, 0, PAGE), content(n, seed, i)) === 0,
  );
  n.cache.insert(who, tokens.slice(0, hit.numTokens), hit.tags);
  n.cache.checkIntegrity();
  n.pool.checkIntegrity();
  return { pages: hit.tags.length, bytesAreSeed };
}

/** Two nodes on an in-memory network, each with a peer store: R dials H. */
function memoryPair(o: { holderFaults?: Faults; holderModel?: string; spill?: SpillStore } = {}) {
  const net = new MemoryNetwork();
  const make = (id: string, dial: boolean, n: Node, faults: Faults, model: string) => {
    const late: { store?: PeerPrefixStore } = {};
    const transport = net.listen({
      nodeId: id,
      secret: SECRET,
      dial,
      handlers: {
        connected: () => undefined,
        message: () => undefined,
        closed: (peer) => late.store?.closed(peer),
        prefix: (from, m) => late.store?.received(from, m),
      },
    });
    const store = new PeerPrefixStore({ cache: n.cache, pool: n.pool, model, io: transport, faults, schedule });
    late.store = store;
    return { ...n, store, transport };
  };
  const h = make('holder:1', false, node(o.spill), o.holderFaults ?? NO_FAULTS, o.holderModel ?? MODEL);
  const r = make('requester:1', true, node(), NO_FAULTS, MODEL);
  return { h, r, close: () => Promise.all([h.transport.close(), r.transport.close()]) };
}

describe('the prefix lease protocol over the in-memory transport', () => {
  it("fetches a tenant's cached prefix from a holder and installs it where match() finds it, byte for byte", async () => {
    const { h, r, close } = memoryPair();
    serve(h, owner('a1', 't1'), PROMPT, 1);
    expect(await r.store.fill(T1, PROMPT, 'holder:1')).toEqual({ asked: 3, installed: 3 });
    expect(matched(r, owner('a2', 't1'), PROMPT, 1)).toEqual({ pages: 3, bytesAreSeed: true });
    expect(h.store.stats()).toMatchObject({ leasesOpen: 0, holder: { pagesServed: 3, pagesMissed: 0 } });
    expect(r.store.stats().requester).toMatchObject({ pagesFetched: 3, pagesMissed: 0 });
    expect(h.cache.numPinned).toBe(0);
    await close();
  });

  it('asks only for the pages after its own cached run, and for none when it holds them all', async () => {
    const { h, r, close } = memoryPair();
    serve(h, owner('a1', 't1'), PROMPT, 1);
    serve(r, owner('r1', 't1'), PROMPT.slice(0, 5), 1); // R holds page 0 itself
    expect(await r.store.fill(T1, PROMPT, 'holder:1')).toEqual({ asked: 2, installed: 2 });
    expect(matched(r, owner('a2', 't1'), PROMPT, 1)).toEqual({ pages: 3, bytesAreSeed: true });
    expect(await r.store.fill(T1, PROMPT, 'holder:1')).toEqual({ asked: 0, installed: 0 });
    await close();
  });

  it('never serves a foreign namespace: tenant t2 asking for the same tokens gets no page', async () => {
    const { h, r, close } = memoryPair();
    serve(h, owner('a1', 't1'), PROMPT, 1);
    expect(await r.store.fill(T2, PROMPT, 'holder:1')).toEqual({ asked: 3, installed: 0 });
    expect(matched(r, owner('b1', 't2'), PROMPT, 1).pages).toBe(0);
    expect(h.store.stats().holder).toMatchObject({ pagesServed: 0, pagesMissed: 3 });
    await close();
  });

  it("hands tenant t2 tenant t1's pages under the fault prefix-key-without-tenant (the negative control)", async () => {
    const { h, r, close } = memoryPair({ holderFaults: new FaultSet(['prefix-key-without-tenant']) });
    serve(h, owner('a1', 't1'), PROMPT, 1);
    expect(await r.store.fill(T2, PROMPT, 'holder:1')).toEqual({ asked: 3, installed: 3 });
    expect(matched(r, owner('b1', 't2'), PROMPT, 1)).toEqual({ pages: 3, bytesAreSeed: true });
    await close();
  });

  it('keeps LoRA adapters apart: a prefix cached under adapter A is fetched under A only (kvTenantOf), not under B or the base model', async () => {
    const A = kvTenantOf(T1, { digest: 'a1'.repeat(16) }, false);
    const B = kvTenantOf(T1, { digest: 'b2'.repeat(16) }, false);
    const { h, r, close } = memoryPair();
    serve(h, owner('a1', A), PROMPT, 1);
    expect(await r.store.fill(B, PROMPT, 'holder:1')).toEqual({ asked: 3, installed: 0 });
    expect(await r.store.fill(T1, PROMPT, 'holder:1')).toEqual({ asked: 3, installed: 0 });
    expect(await r.store.fill(A, PROMPT, 'holder:1')).toEqual({ asked: 3, installed: 3 });
    expect(matched(r, owner('a2', A), PROMPT, 1)).toEqual({ pages: 3, bytesAreSeed: true });
    expect(kvTenantOf(T1, { digest: 'a1'.repeat(16) }, true)).toBe(T1); // lora-drop-from-key: the base model's owner
    await close();
  });

  it('refuses a namespace of another model whole, counted', async () => {
    const { h, r, close } = memoryPair({ holderModel: 'fedcba9876543210' });
    serve(h, owner('a1', 't1'), PROMPT, 1);
    expect(await r.store.fill(T1, PROMPT, 'holder:1')).toEqual({ asked: 3, installed: 0 });
    expect(h.store.stats().holder.refusedNamespace).toBe(1);
    await close();
  });

  it("serves pages from the holder's disk tier, and its block-hash report counts them", async () => {
    const spill = new MemorySpill();
    const { h, r, close } = memoryPair({ spill });
    serve(h, owner('a1', 't1'), PROMPT, 1);
    expect(h.cache.evict(3)).toHaveLength(3); // every page now on "disk" only
    expect(h.cache.numPages).toBe(0);
    const hasher = new PrefixHasher(SECRET);
    expect(h.cache.blockHashReport(100, hasher).get(hasher.tenantTag('t1'))).toEqual(
      expect.arrayContaining(hasher.blockHashes(hasher.tenantTag('t1'), PROMPT.slice(0, 12), PAGE)),
    );
    expect(await r.store.fill(T1, PROMPT, 'holder:1')).toEqual({ asked: 3, installed: 3 });
    expect(matched(r, owner('a2', 't1'), PROMPT, 1)).toEqual({ pages: 3, bytesAreSeed: true });
    await close();
  });
});

/** An in-process pair whose holder waits after its first page until the test opens the gate (the read in flight). */
function gatedPair(holderFaults: Faults = NO_FAULTS, leaseTimeoutMs = 60_000) {
  let openGate: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (openGate = resolve));
  const h = node();
  const r = node();
  const stores: { h?: PeerPrefixStore; r?: PeerPrefixStore } = {};
  const deliver = (to: 'h' | 'r', from: string, m: PrefixMessage) =>
    queueMicrotask(() => stores[to]?.received(from, m));
  stores.h = new PeerPrefixStore({
    ...h,
    model: MODEL,
    schedule,
    faults: holderFaults,
    leaseTimeoutMs,
    highWaterBytes: 0,
    io: { send: (_p, m) => deliver('r', 'H', m), bufferedBytes: () => 1, whenDrained: () => gate },
  });
  stores.r = new PeerPrefixStore({
    ...r,
    model: MODEL,
    schedule,
    fetchTimeoutMs: 5_000,
    io: { send: (_p, m) => deliver('h', 'R', m), bufferedBytes: () => 0, whenDrained: () => Promise.resolve() },
  });
  return { h: { ...h, store: stores.h }, r: { ...r, store: stores.r }, open: () => openGate() };
}

async function until(test: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !test(); i++) await new Promise((resolve) => setTimeout(resolve, 2));
  if (!test()) throw new Error(`timed out waiting for ${what}`);
}

/** Evicts what it can on H, then fills every free page for another tenant with other bytes. */
function evictAndReuse(h: Node): number {
  const evicted = h.cache.evict(h.cache.numEvictable());
  const other = owner('x1', 'tx');
  const result = h.cache.allocate(h.pool.ledger.numFree, other);
  if (result.kind !== 'allocated') throw new Error('no pages');
  for (const tag of result.tags) {
    h.pool.checkWrite(other, [tag]);
    h.pool.scatterSlots(tag.page, 0, PAGE, new Uint8Array(h.pool.slotRangeBytes(PAGE)).fill(0xee));
    h.pool.stamp(tag, PAGE);
  }
  return evicted.length;
}

describe('the lease', () => {
  it('pins the leased pages against eviction while the read is in flight; the pages read are the ones leased', async () => {
    const { h, r, open } = gatedPair();
    serve(h, owner('a1', 't1'), PROMPT, 1);
    const filled = r.store.fill(T1, PROMPT, 'H');
    await until(() => h.store.stats().leasesOpen === 1, 'the lease');
    expect(h.cache.numPinned).toBe(3);
    expect(h.cache.numEvictable()).toBe(0);
    expect(evictAndReuse(h)).toBe(0);
    h.cache.checkIntegrity();
    open();
    expect(await filled).toEqual({ asked: 3, installed: 3 });
    expect(matched(r, owner('a2', 't1'), PROMPT, 1)).toEqual({ pages: 3, bytesAreSeed: true });
    expect(h.cache.numPinned).toBe(0);
    expect(h.cache.numEvictable()).toBe(3);
  });

  it('installs a page evicted and reused mid-read under the fault ignore-prefix-lease (the negative control)', async () => {
    const { h, r, open } = gatedPair(new FaultSet(['ignore-prefix-lease']));
    serve(h, owner('a1', 't1'), PROMPT, 1);
    const filled = r.store.fill(T1, PROMPT, 'H');
    await until(() => h.store.stats().leasesOpen === 1, 'the lease');
    expect(h.cache.numPinned).toBe(0);
    expect(evictAndReuse(h)).toBe(3);
    open();
    expect(await filled).toEqual({ asked: 3, installed: 3 });
    expect(matched(r, owner('a2', 't1'), PROMPT, 1)).toEqual({ pages: 3, bytesAreSeed: false });
  });

  it("is released when the requester's connection closes", async () => {
    const { h, r } = gatedPair();
    serve(h, owner('a1', 't1'), PROMPT, 1);
    void r.store.fill(T1, PROMPT, 'H');
    await until(() => h.store.stats().leasesOpen === 1, 'the lease');
    h.store.closed('R');
    expect(h.store.stats()).toMatchObject({ leasesOpen: 0, holder: { leasesClosed: 1 } });
    expect(h.cache.numPinned).toBe(0);
  });

  it('is released at its deadline, and the holder sends nothing after', async () => {
    const { h, r, open } = gatedPair(NO_FAULTS, 20);
    serve(h, owner('a1', 't1'), PROMPT, 1);
    void r.store.fill(T1, PROMPT, 'H');
    await until(() => h.store.stats().holder.leasesExpired === 1, 'the lease to expire');
    expect(h.cache.numPinned).toBe(0);
    open();
    await until(() => h.store.stats().holder.pagesServed === 1, 'the loop to stop');
    expect(h.store.stats().holder).toMatchObject({ pagesServed: 1, pagesMissed: 2 });
  });

  it('is released after PrefixDone', async () => {
    const { h, r, open } = gatedPair();
    serve(h, owner('a1', 't1'), PROMPT, 1);
    const filled = r.store.fill(T1, PROMPT, 'H');
    await until(() => h.store.stats().leasesOpen === 1, 'the lease');
    open();
    await filled;
    expect(h.store.stats().leasesOpen).toBe(0);
    expect(h.cache.numPinned).toBe(0);
  });
});

describe('the requester refuses a page that fails a check: the rest is a miss, never a read', () => {
  const NS = 'ns';
  const HASHES = ['a', 'b', 'c'].map((c) => c.repeat(64));
  const page = (over: Partial<PrefixPages> = {}): PrefixPages => {
    const payload = new Uint8Array(16).fill(7);
    return {
      type: 'PrefixPages',
      fetchId: 1,
      epoch: 5,
      namespace: NS,
      index: 0,
      pathHash: HASHES[0] as string,
      xxh64: '', // filled below
      payload,
      ...over,
    };
  };
  const withChecksum = (p: PrefixPages, checksumOf = p.payload): PrefixPages => ({
    ...p,
    xxh64: decodeChecksum(checksumOf),
  });
  function start(timeoutMs = 5_000) {
    const sent: PrefixMessage[] = [];
    const req = new PrefixRequester({ send: (_p, m) => sent.push(m), pageBytes: 16, epoch: 5, timeoutMs, schedule });
    return { req, sent, outcome: req.fetch('H', NS, HASHES) };
  }

  it.each([
    ['a bad checksum', withChecksum(page(), new Uint8Array(16).fill(8)), 'checksum'],
    ['a wrong length', withChecksum(page({ payload: new Uint8Array(15).fill(7) })), 'length'],
    ['another path hash', withChecksum(page({ pathHash: 'd'.repeat(64) })), 'path'],
    ['another namespace', withChecksum(page({ namespace: 'other' })), 'namespace'],
    ['a page out of order', withChecksum(page({ index: 1, pathHash: HASHES[1] as string })), 'order'],
  ] as const)('%s ends the fetch with no page accepted', async (_what, frame, reason) => {
    const { req, outcome } = start();
    req.received('H', frame);
    expect(await outcome).toEqual({ pages: [], asked: 3, ended: reason });
    expect(req.stats()).toMatchObject({ pagesFetched: 0, pagesMissed: 3 });
    expect(req.stats().refused[reason]).toBe(1);
  });

  it('accepts good pages before a bad one, and drops frames of another epoch, fetch or peer as stale', async () => {
    const { req, outcome } = start();
    req.received('H', withChecksum(page({ epoch: 6 })));
    req.received('H', withChecksum(page({ fetchId: 2 })));
    req.received('X', withChecksum(page()));
    req.received('H', withChecksum(page()));
    req.received('H', withChecksum(page({ index: 1, pathHash: HASHES[1] as string }), new Uint8Array(1)));
    const got = await outcome;
    expect(got).toMatchObject({ asked: 3, ended: 'checksum' });
    expect(got.pages).toHaveLength(1);
    expect(req.stats().refused.stale).toBe(3);
  });

  it('abandons a fetch at its deadline; its late frames are stale', async () => {
    const { req, outcome } = start(10);
    expect(await outcome).toEqual({ pages: [], asked: 3, ended: 'timeout' });
    req.received('H', withChecksum(page()));
    expect(req.stats().refused).toMatchObject({ timeout: 1, stale: 1 });
    expect(req.numOpen).toBe(0);
  });
});

describe('the prefix-store frames on the wire', () => {
  it('round-trip through the codec, and a page without payload is malformed', () => {
    const fetch: PrefixMessage = {
      type: 'PrefixFetch',
      fetchId: 3,
      epoch: 9,
      namespace: 'ns',
      pathHashes: ['e'.repeat(64)],
    };
    const done: PrefixMessage = { type: 'PrefixDone', fetchId: 3, epoch: 9, count: 1 };
    const pageFrame: PrefixMessage = {
      type: 'PrefixPages',
      fetchId: 3,
      epoch: 9,
      namespace: 'ns',
      index: 0,
      pathHash: 'e'.repeat(64),
      xxh64: '0123456789abcdef',
      payload: new Uint8Array([1, 2, 3]),
    };
    for (const m of [fetch, done, pageFrame])
      expect(decodeClusterFrame(encodeFrame(m))).toEqual({ kind: 'prefix', message: m });
    const bad = encodeFrame({ ...pageFrame, payload: new Uint8Array(0) });
    expect(() => decodeClusterFrame(bad)).toThrow(/PrefixPages without payload/);
    expect(() => decodeClusterFrame(encodeFrame({ ...fetch, pathHashes: ['not-hex'] }))).toThrow(/pathHashes/);
  });
});

/** The xxh64 the holder computes (prefix-fetch-holder.ts). */
const decodeChecksum = (bytes: Uint8Array): string => xxh64(bytes).toString(16).padStart(16, '0');

/** A spill store in memory (the disk tier's contract, without files). */
class MemorySpill implements SpillStore {
  readonly #pages = new Map<string, Uint8Array>();
  has(namespace: SpillNamespace, pathHash: string): boolean {
    return this.#pages.has(`${namespace}|${pathHash}`);
  }
  put(namespace: SpillNamespace, pathHash: string, numBytes: number, fill: (into: Uint8Array) => void): void {
    const bytes = new Uint8Array(numBytes);
    fill(bytes);
    this.#pages.set(`${namespace}|${pathHash}`, bytes);
  }
  get(namespace: SpillNamespace, pathHash: string): SpillLoad {
    const bytes = this.#pages.get(`${namespace}|${pathHash}`);
    return bytes === undefined ? { kind: 'absent' } : { kind: 'hit', bytes };
  }
  stats(): SpillStats {
    const refused = { namespace: 0, path: 0, checksum: 0, length: 0, header: 0, io: 0 };
    return {
      spilledPages: 0,
      loadedPages: 0,
      misses: 0,
      refused,
      numPages: this.#pages.size,
      bytesOnDisk: 0,
      pendingWrites: 0,
    };
  }
}
