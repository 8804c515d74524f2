import { createHmac } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, FaultSet, NO_FAULTS, type Tag } from '../core/index.js';
import { pagesFor, PagePool, PrefixCache, PrefixHasher, type Owner } from '../pages/index.js';
import { DiskTier } from './disk-tier.js';

// A tiny pool (6 pages of 4 tokens, 32 bytes a page) over a real DiskTier in a temp directory.
const PAGE_SIZE = 4;
const NUM_PAGES = 6;
const MODEL = 'f00dfeedf00dfeed';
const owner = (rid: string, tenant: string): Owner => ({ rid: asRequestId(rid), tenant: asTenantId(tenant) });
const tokensFrom = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
/** A's prompt: two full pages and one token. */
const PROMPT = tokensFrom(1, 9);

const dirs: string[] = [];
const tiers: DiskTier[] = [];
afterEach(async () => {
  for (const tier of tiers.splice(0)) await tier.flush();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface Node {
  readonly pool: PagePool;
  readonly cache: PrefixCache;
  readonly tier: DiskTier;
  readonly logs: string[];
}

function start(dir: string, faults = NO_FAULTS, hasher?: PrefixHasher, model = MODEL): Node {
  const logs: string[] = [];
  const pool = PagePool.create({ numPages: NUM_PAGES, pageSize: PAGE_SIZE, numLayers: 1, numKvHeads: 1, headDim: 1 });
  const tier = DiskTier.open({ dir, maxBytes: 1 << 20, faults, log: (line) => logs.push(line) });
  tiers.push(tier);
  const spill = { store: tier, model, ...(hasher === undefined ? {} : { hasher }) };
  return { pool, cache: new PrefixCache({ pool, faults, spill }), tier, logs };
}

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-kv-disk-'));
  dirs.push(dir);
  return dir;
}

/** The bytes a "forward pass" writes for page i of `tokens`: a function of the tokens up to it. */
function kvOf(tokens: readonly number[], pageIndex: number): Uint8Array {
  const bytes = new Uint8Array(2 * PAGE_SIZE * 4);
  const seed = tokens.slice(0, (pageIndex + 1) * PAGE_SIZE).reduce((a, t) => a * 31 + t, 7);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (seed + i * 13) & 0xff;
  return bytes;
}

/** One request, as the scheduler runs it: match, allocate the rest, write and stamp, insert. Returns its table and hit. */
function serve(n: Node, who: Owner, tokens: readonly number[]): { table: Tag[]; numCached: number } {
  const hit = n.cache.match(who, tokens.slice(0, -1));
  n.pool.checkRead(who, hit.tags, hit.numTokens);
  const result = n.cache.allocate(pagesFor(tokens.length, PAGE_SIZE) - hit.tags.length, who);
  if (result.kind !== 'allocated') throw new Error('out of pages');
  const table = [...hit.tags, ...result.tags];
  for (let i = hit.tags.length; i < table.length; i++) {
    const tag = table[i] as Tag;
    n.pool.checkWrite(who, [tag]);
    n.pool.scatterSlots(tag.page, 0, PAGE_SIZE, kvOf(tokens, i));
    n.pool.stamp(tag, Math.min(PAGE_SIZE, tokens.length - i * PAGE_SIZE));
  }
  n.cache.insert(who, tokens, table);
  n.cache.checkIntegrity();
  n.pool.checkIntegrity();
  return { table, numCached: hit.numTokens };
}

/** A's prompt is served, then tenant "other" fills the pool: A's two pages are evicted (spilled). */
function spillAPrompt(n: Node): void {
  expect(serve(n, owner('a1', 'A'), PROMPT).table.map((t) => t.page)).toEqual([0, 1, 2]);
  // Pages 3, 4, 5 free, then 2 (A's tail, freed), then A's cached pages, evicted leaf first.
  expect(serve(n, owner('x1', 'other'), tokensFrom(100, 24)).table.map((t) => t.page)).toEqual([3, 4, 5, 2, 1, 0]);
}

/** The pages a match of A's prompt holds (exact ids) and whether their bytes are what A computed. */
function matchPrompt(n: Node, who: Owner): { pages: number[]; numTokens: number; bytesAreAs: boolean } {
  const hit = n.cache.match(who, PROMPT.slice(0, -1));
  n.pool.checkRead(who, hit.tags, hit.numTokens);
  const bytesAreAs = hit.tags.every((tag, i) =>
    Buffer.from(n.pool.gatherSlots(tag.page, 0, PAGE_SIZE)).equals(Buffer.from(kvOf(PROMPT, i))),
  );
  n.cache.checkIntegrity();
  return { pages: hit.tags.map((t) => t.page), numTokens: hit.numTokens, bytesAreAs };
}

const files = (dir: string): string[] => readdirSync(dir).sort();
/** A file's fixed header: magic, version, sizes, path hash, xxh64, route (key id, tenant tag, block hash). */
const HEADER = 80;

describe('DiskTier under the prefix cache', () => {
  it('spills the pages the cache evicts, one file each, written crash-safe', async () => {
    const dir = freshDir();
    const n = start(dir);
    spillAPrompt(n);
    expect(n.tier.stats()).toMatchObject({ spilledPages: 2, numPages: 2, pendingWrites: 2 });
    await n.tier.flush();
    expect(files(dir)).toHaveLength(2);
    expect(files(dir).every((f) => /^[0-9a-f]{64}\.kvp$/.test(f))).toBe(true);
    expect(n.tier.stats()).toMatchObject({
      pendingWrites: 0,
      bytesOnDisk: 2 * (HEADER + 32 + Buffer.byteLength(ns('A'))),
    });
  });

  it('loads a spilled prefix back into fresh pages on the next match of the same tenant, before and after the write', async () => {
    for (const flushFirst of [false, true]) {
      const n = start(freshDir());
      spillAPrompt(n);
      if (flushFirst) await n.tier.flush();
      // The pool holds "other"'s 6 pages; each load evicts that chain's leaf (page 0, then 1).
      expect(matchPrompt(n, owner('a2', 'A'))).toEqual({ pages: [0, 1], numTokens: 8, bytesAreAs: true });
      expect(n.tier.stats()).toMatchObject({ loadedPages: 2 });
    }
  });

  it('gives another tenant with the same tokens no hit (the namespace is in the key and the check)', async () => {
    const n = start(freshDir());
    spillAPrompt(n);
    await n.tier.flush();
    expect(matchPrompt(n, owner('b1', 'B'))).toEqual({ pages: [], numTokens: 0, bytesAreAs: true });
    expect(n.tier.stats().loadedPages).toBe(0);
  });

  it('lets tenant B load tenant A pages under the fault spill-without-namespace (the negative control)', async () => {
    const n = start(freshDir(), new FaultSet(['spill-without-namespace']));
    spillAPrompt(n);
    await n.tier.flush();
    expect(matchPrompt(n, owner('b1', 'B'))).toEqual({ pages: [0, 1], numTokens: 8, bytesAreAs: true });
  });

  it('refuses a file whose header names another namespace, counted and logged', async () => {
    const dir = freshDir();
    const n = start(dir);
    spillAPrompt(n);
    await n.tier.flush();
    const name = files(dir)[0] as string;
    const file = readFileSync(join(dir, name));
    // Same length, another tenant in the header: "A" -> "Z".
    const at = file.indexOf(Buffer.from('"A"'));
    file[at + 1] = 'Z'.charCodeAt(0);
    writeFileSync(join(dir, name), file);
    const m = matchPrompt(n, owner('a2', 'A'));
    expect(m.numTokens).toBeLessThan(8);
    expect(n.tier.stats().refused.namespace).toBe(1);
    expect(n.logs.filter((l) => l.includes('(namespace)'))).toHaveLength(1);
    expect(files(dir)).not.toContain(name);
  });

  it('refuses a page whose bytes were corrupted on disk (xxh64), and deletes the file', async () => {
    const dir = freshDir();
    const n = start(dir);
    spillAPrompt(n);
    await n.tier.flush();
    corruptEveryPayload(dir);
    expect(matchPrompt(n, owner('a2', 'A'))).toEqual({ pages: [], numTokens: 0, bytesAreAs: true });
    expect(n.tier.stats().refused.checksum).toBe(1);
    expect(n.logs.filter((l) => l.includes('(checksum)'))).toHaveLength(1);
  });

  it('reads the corrupted bytes under the fault skip-spill-checksum (the negative control)', async () => {
    const dir = freshDir();
    const n = start(dir, new FaultSet(['skip-spill-checksum']));
    spillAPrompt(n);
    await n.tier.flush();
    corruptEveryPayload(dir);
    expect(matchPrompt(n, owner('a2', 'A'))).toMatchObject({ numTokens: 8, bytesAreAs: false });
  });

  it('survives a restart: a new cache over the same directory hits', async () => {
    const dir = freshDir();
    const first = start(dir);
    spillAPrompt(first);
    await first.tier.flush();
    const second = start(dir);
    expect(second.tier.stats()).toMatchObject({ numPages: 2, spilledPages: 0 });
    expect(matchPrompt(second, owner('a2', 'A'))).toEqual({ pages: [0, 1], numTokens: 8, bytesAreAs: true });
  });

  it('spills the pages still cached at a stop (spillAll), so a restart hits those too', async () => {
    const dir = freshDir();
    const first = start(dir);
    serve(first, owner('a1', 'A'), PROMPT);
    expect(first.tier.stats().numPages).toBe(0);
    expect(first.cache.spillAll()).toBe(2);
    await first.tier.flush();
    expect(first.cache.numPages).toBe(2); // still cached
    expect(matchPrompt(start(dir), owner('a2', 'A'))).toEqual({ pages: [0, 1], numTokens: 8, bytesAreAs: true });
  });

  it('refuses a truncated file at start-up, with one log line, and deletes it', async () => {
    const dir = freshDir();
    const first = start(dir);
    spillAPrompt(first);
    await first.tier.flush();
    const [name] = files(dir) as [string];
    truncateSync(join(dir, name), HEADER + 4); // past the fixed header, short of the rest
    const second = start(dir);
    expect(second.logs.filter((l) => l.includes(`refused ${name} (length)`))).toHaveLength(1);
    expect(files(dir)).not.toContain(name);
    expect(second.tier.stats()).toMatchObject({ numPages: 1 });
    expect(matchPrompt(second, owner('a2', 'A')).numTokens).toBeLessThan(8);
  });

  it('never loads what a write killed before its rename left (a temp file), and deletes it at start-up', async () => {
    const dir = freshDir();
    const first = start(dir);
    spillAPrompt(first);
    await first.tier.flush();
    // kill -9 between fsync and rename: the whole page, under its temp name only.
    for (const name of files(dir)) {
      writeFileSync(join(dir, `.tmp-${name}-999-0`), readFileSync(join(dir, name)));
      rmSync(join(dir, name));
    }
    const second = start(dir);
    expect(files(dir)).toEqual([]);
    expect(second.logs.filter((l) => l.includes('did not finish'))).toHaveLength(2);
    expect(matchPrompt(second, owner('a2', 'A'))).toEqual({ pages: [], numTokens: 0, bytesAreAs: true });
  });

  it('never evicts, to make room for a load, a page the same match returns', async () => {
    const n = start(freshDir());
    const prompt = tokensFrom(1, 13); // three full pages and one token
    expect(serve(n, owner('a1', 'A'), prompt).table.map((t) => t.page)).toEqual([0, 1, 2, 3]);
    // "other" takes 5 pages: 3 free, then A's leaves 2 and 1 are evicted (spilled); A's page 0 stays, unreferenced.
    serve(n, owner('x1', 'other'), tokensFrom(100, 20));
    await n.tier.flush();
    expect(n.pool.ledger.numFree).toBe(0);
    // A's page 0 is now the least recently used leaf: loading pages 1 and 2 must evict "other"'s leaves instead.
    const hit = n.cache.match(owner('a2', 'A'), prompt.slice(0, -1));
    n.pool.checkRead(owner('a2', 'A'), hit.tags, hit.numTokens);
    expect(hit.numTokens).toBe(12);
    expect(hit.tags[0]?.page).toBe(0);
    hit.tags.forEach((tag, i) => {
      expect(Buffer.from(n.pool.gatherSlots(tag.page, 0, PAGE_SIZE))).toEqual(Buffer.from(kvOf(prompt, i)));
    });
    n.cache.checkIntegrity();
    n.pool.checkIntegrity();
  });

  it('keeps the directory within its size, deleting the least recently used files first', async () => {
    const dir = freshDir();
    const pool = PagePool.create({ numPages: 3, pageSize: PAGE_SIZE, numLayers: 1, numKvHeads: 1, headDim: 1 });
    const fileBytes = HEADER + 32 + Buffer.byteLength(ns('A'));
    const tier = DiskTier.open({ dir, maxBytes: 2 * fileBytes, log: () => undefined });
    tiers.push(tier);
    const n: Node = { pool, cache: new PrefixCache({ pool, spill: { store: tier, model: MODEL } }), tier, logs: [] };
    for (let i = 0; i < 4; i++) serve(n, owner(`a${i}`, 'A'), tokensFrom(1000 * (i + 1), 5));
    await tier.flush();
    serve(n, owner('a9', 'A'), tokensFrom(9000, 9)); // evicts the last two prompts' pages
    await tier.flush();
    expect(tier.stats()).toMatchObject({ spilledPages: 4, numPages: 2, bytesOnDisk: 2 * fileBytes });
    expect(files(dir)).toHaveLength(2);
  });
});

function ns(tenant: string): string {
  return JSON.stringify(['tessera-cache-ns-v1', tenant, MODEL, 'f32', PAGE_SIZE, 8, '']);
}

/** Flips the last byte of every page file (its payload). */
function corruptEveryPayload(dir: string): void {
  for (const name of files(dir)) {
    const file = readFileSync(join(dir, name));
    file[file.length - 1] = (file[file.length - 1] as number) ^ 0xff;
    writeFileSync(join(dir, name), file);
  }
}

describe('DiskTier: what a restarted prefill reports of the pages it finds on disk', () => {
  const SECRET = 'disk-tier-test-cluster-secret-0123';
  const OTHER_SECRET = 'another-cluster-secret-9876543210';
  /** A's two spilled pages as a router computes them: tenant tag and chained block hashes, keyed with secret. */
  const expected = (secret: string): Map<string, string[]> => {
    const h = new PrefixHasher(secret);
    return new Map([[h.tenantTag('A'), h.blockHashes(h.tenantTag('A'), PROMPT, PAGE_SIZE).reverse()]]);
  };
  const sorted = (report: Map<string, string[]>): Map<string, string[]> =>
    new Map([...report].map(([tag, hashes]) => [tag, [...hashes].sort()]));

  /** A spills its prompt under SECRET; the tier is then opened again (a restart) with `faults`. */
  async function restarted(faults = NO_FAULTS, model = MODEL): Promise<{ dir: string; after: Node }> {
    const dir = freshDir();
    const before = start(dir, NO_FAULTS, new PrefixHasher(SECRET));
    spillAPrompt(before);
    await before.tier.flush();
    return { dir, after: start(dir, faults, new PrefixHasher(SECRET), model) };
  }

  it("reports the block hashes of the pages spilled before the restart, keyed with the cluster's secret", async () => {
    const { after } = await restarted();
    expect(after.cache.numPages).toBe(0);
    const report = after.cache.blockHashReport(100, new PrefixHasher(SECRET));
    expect(sorted(report)).toEqual(sorted(expected(SECRET)));
    // Loaded back into the pool, the pages are reported once, not once per tier.
    expect(matchPrompt(after, owner('a2', 'A')).numTokens).toBe(8);
    expect(sorted(after.cache.blockHashReport(100, new PrefixHasher(SECRET)))).toEqual(sorted(expected(SECRET)));
  });

  it('reports nothing of them to a hasher of another secret, nor for another model', async () => {
    const { after } = await restarted();
    expect(after.cache.blockHashReport(100, new PrefixHasher(OTHER_SECRET)).size).toBe(0);
    const { after: otherModel } = await restarted(NO_FAULTS, 'beefbeefbeefbeef');
    expect(otherModel.cache.blockHashReport(100, new PrefixHasher(SECRET)).size).toBe(0);
  });

  it('reports them under another secret with the fault report-foreign-disk-pages (the negative control)', async () => {
    const { after } = await restarted(new FaultSet(['report-foreign-disk-pages']));
    const report = after.cache.blockHashReport(100, new PrefixHasher(OTHER_SECRET));
    expect(sorted(report)).toEqual(sorted(expected(SECRET)));
  });

  it("keeps in a page's file neither the secret, its key, a tenant's tag in the clear beyond the report's, nor token ids", async () => {
    const { dir } = await restarted();
    const key = createHmac('sha256', SECRET).update('tessera-prefix-key-v2').digest();
    for (const name of files(dir)) {
      const file = readFileSync(join(dir, name));
      expect(file.includes(Buffer.from(SECRET))).toBe(false);
      expect(file.includes(key.subarray(0, 8))).toBe(false);
      expect(file.subarray(0, HEADER).includes(Buffer.from(PROMPT.slice(0, PAGE_SIZE).join(',')))).toBe(false);
    }
  });

  it('refuses a file of the previous format (version 1, no route) at start-up with a log line', async () => {
    const { dir } = await restarted();
    const [name] = files(dir) as [string];
    const file = readFileSync(join(dir, name));
    file.writeUInt32LE(1, 4);
    writeFileSync(join(dir, name), file);
    const again = start(dir, NO_FAULTS, new PrefixHasher(SECRET));
    expect(again.logs.filter((l) => l.includes(`refused ${name} (header)`))).toHaveLength(1);
    expect(again.logs).toContain('kv-disk: 1 page files of another format version refused (this one writes 2)');
    expect(files(dir)).not.toContain(name);
    expect([...again.cache.blockHashReport(100, new PrefixHasher(SECRET)).values()].flat()).toHaveLength(1);
  });
});
