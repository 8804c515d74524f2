// GET /kv-events and /kv-events/stream over a real prefix cache publishing into a KvEventRing:
// off (404) without keys; 401 without a key, with a tenant's API key or a wrong key; 200 for the
// admin key and for the cluster secret. The events are the keyed block hashes a router computes,
// in vLLM's batch shape; the serialized answer (JSON and SSE) holds none of the prompt's token ids
// and no tenant name. A reader behind the ring gets a reset (AllBlocksCleared first).
// Negative control: the `open-kv-events` fault point serves the events to a stranger.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, FaultSet, kvTenantOf, type Tag } from '../../core/index.js';
import { KvEventRing, PagePool, PrefixCache, PrefixHasher, type Owner } from '../../pages/index.js';
import { wireBatch, type KvEventsAccess } from './kv-events-route.js';
import { send, startTestServer, type TestServer } from '../testing/harness.js';

const ADMIN = 'admin-key-0123456789abcdef';
const SECRET = 'cluster-secret-0123456789abcdef';
const PAGE_SIZE = 4;
/** Token ids no hash, tag or seq can contain by chance as text: 5 digits each. */
const TOKENS = Array.from({ length: 13 }, (_, i) => 52_001 + i);
const API_KEYS = new Map([['user-key', asTenantId('acme')]]);

/** A cache over a 4-page pool whose events go to a ring of `capacity`. */
function cacheInto(capacity: number, unkeyed = false): { ring: KvEventRing; cache: PrefixCache; pool: PagePool } {
  const pool = PagePool.create({ numPages: 4, pageSize: PAGE_SIZE, numLayers: 1, numKvHeads: 1, headDim: 1 });
  const ring = new KvEventRing(new PrefixHasher(SECRET, unkeyed), capacity);
  return { ring, pool, cache: new PrefixCache({ pool, events: ring }) };
}

/** Computes and caches tokens for a tenant (every page written and stamped). */
function serve(pool: PagePool, cache: PrefixCache, tenant: string, tokens: readonly number[]): void {
  const who: Owner = { rid: asRequestId(`r-${tenant}-${tokens.length}`), tenant: asTenantId(tenant) };
  const result = cache.allocate(Math.ceil(tokens.length / PAGE_SIZE), who);
  if (result.kind !== 'allocated') throw new Error('out of pages');
  result.tags.forEach((tag: Tag, i) => pool.stamp(tag, Math.min(PAGE_SIZE, tokens.length - i * PAGE_SIZE)));
  cache.insert(who, tokens, result.tags);
}

const access = (ring: KvEventRing, keys: readonly string[] = [ADMIN, SECRET]): KvEventsAccess => ({
  ring,
  keys,
  node: '10.0.0.7:7000',
  blockSize: PAGE_SIZE,
});
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

/** The first SSE message of GET /kv-events/stream (then the connection is closed). */
function firstStreamMessage(url: string, path: string, headers: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        const end = text.indexOf('\n\n');
        if (end >= 0 && !text.startsWith(':')) {
          resolve(text.slice(0, end));
          req.destroy();
        }
      });
      res.on('end', () => reject(new Error(`stream ended: ${res.statusCode ?? '?'} ${text}`)));
    });
    req.on('error', reject);
    req.end();
  });
}

function expectNoPromptNorTenant(text: string): void {
  expect(text).toContain('BlockStored');
  for (const token of TOKENS) expect(text).not.toContain(String(token));
  expect(text).not.toContain('acme');
}

const servers: TestServer[] = [];
let on: TestServer;
let off: TestServer;
let open: TestServer;
let ring: KvEventRing;
beforeAll(async () => {
  const c = cacheInto(64);
  ring = c.ring;
  serve(c.pool, c.cache, 'acme', TOKENS); // 3 full pages stored
  c.cache.evict(1); // the last one removed
  on = await startTestServer({ apiKeys: API_KEYS, adminKey: ADMIN, kvEvents: access(ring) });
  off = await startTestServer({ apiKeys: API_KEYS, adminKey: ADMIN });
  open = await startTestServer({ apiKeys: API_KEYS, faults: new FaultSet(['open-kv-events']), kvEvents: access(ring) });
  servers.push(on, off, open);
});
afterAll(() => Promise.all(servers.map((s) => s.close())));

describe('who may read /kv-events', () => {
  it('nobody on a server without keys for it: 404 on both paths', async () => {
    expect((await send(off.url, 'GET', '/kv-events', undefined, bearer(ADMIN))).status).toBe(404);
    expect((await send(off.url, 'GET', '/kv-events/stream', undefined, bearer(ADMIN))).status).toBe(404);
    const none = await startTestServer({ kvEvents: access(ring, []) });
    servers.push(none);
    expect((await send(none.url, 'GET', '/kv-events')).status).toBe(404);
  });

  it.each([
    ['no key', {}],
    ["a tenant's API key", bearer('user-key')],
    ['a wrong key', bearer('not-the-admin-key')],
    ['the admin key with a suffix', bearer(`${ADMIN}x`)],
  ])('401 with %s, on both paths', async (_, headers) => {
    for (const path of ['/kv-events', '/kv-events/stream']) {
      const r = await send(on.url, 'GET', path, undefined, headers);
      expect(r.status).toBe(401);
      expect(r.text).not.toContain('BlockStored');
    }
  });

  it('200 with the admin key and with the cluster secret', async () => {
    for (const key of [ADMIN, SECRET]) {
      const r = await send(on.url, 'GET', '/kv-events', undefined, bearer(key));
      expect(r.status).toBe(200);
      expect(r.json.events).toHaveLength(4);
    }
  });

  it('negative control: with open-kv-events, a stranger reads them', async () => {
    const r = await send(open.url, 'GET', '/kv-events');
    expect(r.status).toBe(200);
    expect(r.json.events).toHaveLength(4);
  });
});

describe('what /kv-events carries', () => {
  it("the keyed block hashes a router computes, in vLLM's batch shape", async () => {
    const hasher = new PrefixHasher(SECRET);
    const tag = hasher.tenantTag('acme');
    const [h0, h1, h2] = hasher.blockHashes(tag, TOKENS, PAGE_SIZE);
    const r = await send(on.url, 'GET', '/kv-events?after=0', undefined, bearer(ADMIN));
    const stored = { token_ids: [], block_size: PAGE_SIZE, lora_id: null, medium: 'GPU', tenant: tag };
    expect(r.json).toMatchObject({ node: '10.0.0.7:7000', block_size: PAGE_SIZE, reset: false, next: 4 });
    expect(r.json.events).toEqual([
      { event_id: 1, type: 'BlockStored', block_hashes: [h0], parent_block_hash: null, ...stored },
      { event_id: 2, type: 'BlockStored', block_hashes: [h1], parent_block_hash: h0, ...stored },
      { event_id: 3, type: 'BlockStored', block_hashes: [h2], parent_block_hash: h1, ...stored },
      { event_id: 4, type: 'BlockRemoved', block_hashes: [h2], medium: 'GPU', tenant: tag },
    ]);
    const later = await send(on.url, 'GET', '/kv-events?after=2&max=1', undefined, bearer(ADMIN));
    expect(later.json.events.map((e: { event_id: number }) => e.event_id)).toEqual([3]);
    expect(later.json.next).toBe(3);
  });

  it("a block computed under a LoRA adapter names it in lora_id (vLLM's field); the base model's is null", () => {
    const c = cacheInto(64);
    const digest = 'f'.repeat(32);
    serve(c.pool, c.cache, kvTenantOf(asTenantId('acme'), { digest }, false), TOKENS.slice(0, 4));
    serve(c.pool, c.cache, 'acme', TOKENS.slice(0, 8));
    const names = (d: string): string | undefined => (d === digest ? 'sql-lora' : undefined);
    const batch = wireBatch(c.ring.read(0, 10), { ...access(c.ring), adapterName: names }, 0);
    const stored = (batch['events'] as Record<string, unknown>[]).filter((e) => e['type'] === 'BlockStored');
    expect(stored.map((e) => e['lora_id'])).toEqual(['sql-lora', null, null]);
    // A digest the node no longer names (never loaded here): the digest, never null (that would say base).
    expect(wireBatch(c.ring.read(0, 1), access(c.ring), 0)['events']).toMatchObject([{ lora_id: digest }]);
  });

  it('negative control: under lora-drop-from-key the adapter is out of the KV tenant, and lora_id is null', () => {
    const c = cacheInto(64);
    serve(c.pool, c.cache, kvTenantOf(asTenantId('acme'), { digest: 'f'.repeat(32) }, true), TOKENS.slice(0, 4));
    expect(wireBatch(c.ring.read(0, 1), access(c.ring), 0)['events']).toMatchObject([{ lora_id: null }]);
  });

  it("neither a token id nor the tenant's name, as JSON or as a stream", async () => {
    const json = (await send(on.url, 'GET', '/kv-events', undefined, bearer(ADMIN))).text;
    const sse = await firstStreamMessage(on.url, '/kv-events/stream', bearer(SECRET));
    expect(sse).toMatch(/^id: 4\nevent: kv\ndata: \{/);
    for (const text of [json, sse]) expectNoPromptNorTenant(text);
  });

  it('negative control: under unkeyed-prefix-hashes (the hasher of the fault) the check sees the tenant', async () => {
    const c = cacheInto(64, true);
    serve(c.pool, c.cache, 'acme', TOKENS);
    const t = await startTestServer({ adminKey: ADMIN, kvEvents: access(c.ring) });
    servers.push(t);
    const json = (await send(t.url, 'GET', '/kv-events', undefined, bearer(ADMIN))).text;
    expect(() => expectNoPromptNorTenant(json)).toThrow(/acme/);
  });

  it('a stream goes on from Last-Event-ID and sends events published after it connected', async () => {
    const c = cacheInto(64);
    const t = await startTestServer({ adminKey: ADMIN, kvEvents: access(c.ring) });
    servers.push(t);
    serve(c.pool, c.cache, 'acme', TOKENS.slice(0, 4)); // event 1
    const message = firstStreamMessage(t.url, '/kv-events/stream', { ...bearer(ADMIN), 'last-event-id': '1' });
    while (c.ring.numListeners === 0) await new Promise((resolve) => setTimeout(resolve, 5)); // connected
    serve(c.pool, c.cache, 'acme', TOKENS.slice(0, 8)); // event 2 (page 0 cached already)
    const text = await message;
    expect(text).toMatch(/^id: 2\n/);
    const batch = JSON.parse(text.split('data: ')[1] as string);
    expect(batch.events.map((e: { event_id: number }) => e.event_id)).toEqual([2]);
  });

  it('a reader behind the ring is reset: AllBlocksCleared, then what the ring holds', async () => {
    const c = cacheInto(2);
    for (let i = 0; i < 3; i++) {
      serve(c.pool, c.cache, `t${i}`, TOKENS.slice(0, 4));
      c.cache.evict(1);
    } // 6 events; the ring holds 5 and 6
    const t = await startTestServer({ adminKey: ADMIN, kvEvents: access(c.ring) });
    servers.push(t);
    const r = await send(t.url, 'GET', '/kv-events?after=2', undefined, bearer(ADMIN));
    expect(r.json.reset).toBe(true);
    expect(r.json.events.map((e: { type: string; event_id?: number }) => e.event_id ?? e.type)).toEqual([
      'AllBlocksCleared',
      5,
      6,
    ]);
    const sse = await firstStreamMessage(t.url, '/kv-events/stream?after=1', bearer(ADMIN));
    expect(JSON.parse(sse.split('data: ')[1] as string).events[0]).toEqual({ type: 'AllBlocksCleared' });
  });

  it('a stream whose reader stops reading holds back (the socket full), then resets: no unbounded buffer', async () => {
    const ring = new KvEventRing(new PrefixHasher(SECRET), 1024);
    const t = await startTestServer({ adminKey: ADMIN, kvEvents: access(ring) });
    servers.push(t);
    const TOTAL = 400 * 512; // about 36 MB as a stream: far beyond what the sockets buffer (4 MB here)
    const event = {
      type: 'BlockStored',
      tenant: 'tag',
      blockHash: 'ab'.repeat(8),
      parentHash: null,
      adapterDigest: null,
    } as const;
    type Batch = { reset: boolean; next: number; events: { event_id?: number }[] };
    const stats = await new Promise<{ bytes: number; batches: Batch[] }>((resolve, reject) => {
      const req = request(`${t.url}/kv-events/stream`, { headers: bearer(ADMIN) }, (res) => {
        res.pause(); // a reader that does not read
        void (async () => {
          for (let i = 0; i < TOTAL; i += 512) {
            for (let j = 0; j < 512; j++) ring.publish(event);
            await new Promise((next) => setImmediate(next)); // the stream writes what the socket takes
          }
          let text = '';
          let lastAt = -1; // where the last event's `id:` line starts, once it came
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            const from = Math.max(0, text.length - 32);
            text += chunk;
            if (lastAt < 0) lastAt = text.indexOf(`id: ${ring.lastSeq}\n`, from);
            if (lastAt < 0 || text.indexOf('\n\n', lastAt) < 0) return;
            req.destroy();
            const batches = [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1] as string) as Batch);
            resolve({ bytes: text.length, batches });
          });
          res.resume();
        })().catch(reject);
      });
      req.on('error', reject);
      req.end();
    });
    expect(stats.batches.at(-1)?.next).toBe(TOTAL);
    expect(stats.batches.filter((b) => b.reset).length).toBeGreaterThan(0);
    // Between resets, events arrive in order with no gap.
    const ids = stats.batches.flatMap((b) => (b.reset ? [-1] : []).concat(b.events.flatMap((e) => e.event_id ?? [])));
    ids.forEach((id, k) => {
      const before = ids[k - 1];
      if (id !== -1 && before !== undefined && before !== -1) expect(id).toBe(before + 1);
    });
    // Had every event been buffered for the reader it would have got them all: it got a part.
    expect(ids.filter((id) => id !== -1).length).toBeLessThan(TOTAL / 2);
  });

  it('refuses a cursor that is not a whole number', async () => {
    expect((await send(on.url, 'GET', '/kv-events?after=-1', undefined, bearer(ADMIN))).status).toBe(400);
    expect((await send(on.url, 'GET', '/kv-events?after=1e3', undefined, bearer(ADMIN))).status).toBe(400);
  });
});
