// KV events of a real `tessera serve` (builtin:tiny, API keys, the admin key): GET /kv-events and
// /kv-events/stream answer only the admin key (no key and a tenant's key: 401); a tenant's prompt
// publishes BlockStored events whose hashes are the keyed block hashes of its token ids (keyed with
// the admin key, the tenant named by its keyed tag), in vLLM's batch shape with no token id and no
// tenant name; an open stream gets another tenant's events as they happen; the server still stops
// at once with a stream open (the stream ends when the server starts closing).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrefixHasher } from '../../src/pages/index.js';
import { ADMIN_KEY, promptIds, startServer, useTestHome, writeJson, type Server } from './support/process.js';

const KEYS = { 'sk-alice': 'alice', 'sk-bob': 'bob' };
const PAGE_SIZE = 16;
const ALICE = promptIds(70, 4242); // 4 full pages cached (the last prompt token is always computed)
const BOB = promptIds(40, 777);
const hasher = new PrefixHasher(ADMIN_KEY);

const home = useTestHome();
let server: Server;
beforeAll(async () => {
  const keys = await writeJson(home.dir, 'keys.json', KEYS);
  server = await startServer(['--api-keys', keys, '--context-length', '256', '--kv-pages', '32'], home.dir);
});
afterAll(async () => {
  await server?.stop();
});

const get = (path: string, key?: string): Promise<Response> =>
  fetch(`${server.url}${path}`, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });

async function complete(key: string, prompt: number[]): Promise<void> {
  await server.client(key).completions.create({ model: 'builtin:tiny', prompt, max_tokens: 4, temperature: 0 });
}

interface WireEvent {
  readonly event_id: number;
  readonly type: string;
  readonly block_hashes: string[];
  readonly tenant: string;
  readonly [field: string]: unknown;
}

describe('KV events of tessera serve', () => {
  it('answer no one but the admin key', async () => {
    for (const path of ['/kv-events', '/kv-events/stream']) {
      expect((await get(path)).status).toBe(401);
      expect((await get(path, 'sk-alice')).status).toBe(401);
    }
  });

  it("carry the keyed block hashes of a tenant's prompt, and neither its token ids nor its name", async () => {
    await complete('sk-alice', ALICE);
    const r = await get('/kv-events?after=0', ADMIN_KEY);
    expect(r.status).toBe(200);
    const text = await r.text();
    const batch = JSON.parse(text) as { block_size: number; reset: boolean; events: WireEvent[] };
    expect(batch).toMatchObject({ block_size: PAGE_SIZE, reset: false });
    const tag = hasher.tenantTag('alice');
    const stored = batch.events.filter((e) => e.type === 'BlockStored');
    expect(stored.length).toBeGreaterThanOrEqual(4);
    expect(stored.slice(0, 4).map((e) => e.block_hashes[0])).toEqual(hasher.blockHashes(tag, ALICE, PAGE_SIZE, 4));
    for (const e of stored) expect(e).toMatchObject({ tenant: tag, token_ids: [], block_size: PAGE_SIZE });
    expect(text).not.toContain('alice');
    // Every number in the answer is a sequence number, a size or a time: no token id.
    const numbers = [...text.matchAll(/[:,[]\s*(\d+(?:\.\d+)?)\s*(?=[,\]}])/g)].map((m) => Number(m[1]));
    const allowed = new Set([PAGE_SIZE, ...batch.events.map((e) => e.event_id)]);
    expect(numbers.filter((n) => !allowed.has(n) && !(n > 1e9))).toEqual([]); // ts: unix seconds
  });

  it("stream another tenant's events as they happen, from the cursor given", async () => {
    const last = (await (await get('/kv-events', ADMIN_KEY)).json()) as { next: number };
    const controller = new AbortController();
    const r = await fetch(`${server.url}/kv-events/stream`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}`, 'last-event-id': String(last.next) },
      signal: controller.signal,
    });
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = (r.body as ReadableStream<Uint8Array>).getReader();
    await complete('sk-bob', BOB);
    let text = '';
    while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    const batch = JSON.parse(/data: (.*)\n/.exec(text)?.[1] as string) as { events: WireEvent[] };
    expect(batch.events[0]?.event_id).toBe(last.next + 1);
    expect(batch.events.every((e) => e.tenant === hasher.tenantTag('bob'))).toBe(true);
    expect(batch.events[0]?.block_hashes).toEqual(hasher.blockHashes(hasher.tenantTag('bob'), BOB, PAGE_SIZE, 1));
  });

  it('end with the server: it stops at once with a stream open', async () => {
    const r = await get('/kv-events/stream', ADMIN_KEY);
    expect(r.status).toBe(200);
    const started = Date.now();
    const exited = await server.stop();
    expect(exited.code).toBe(0);
    // Without that, the drain waits its 10 s for the stream, and the stream (which ends only when told) outlives it.
    expect(Date.now() - started).toBeLessThan(8_000);
  });
});
