// --kv-disk: a tenant's prefix evicted from a small pool spills to files and is loaded back on
// its next request (cached_tokens shows it, the greedy output is the same), never for another
// tenant, and survives a restart of the server on the same directory.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { promptIds, scrape, startServer, useTestHome, waitUntil, writeJson, type Server } from './support/process.js';

const home = useTestHome();
let keysFile: string;
let diskDir: string;
const KEYS = { 'sk-alice': 'alice', 'sk-bob': 'bob' };
/** 24 pages of 16 tokens: three 200-token prompts of another tenant push a 70-token one out. */
const ARGS = ['--context-length', '256', '--kv-pages', '24'];
const PROMPT = promptIds(70, 4242); // 4 full pages can be cached (the last token is always computed)
const HOT = promptIds(70, 6161); // bob's, still in the pool at the stop

beforeAll(async () => {
  keysFile = await writeJson(home.dir, 'keys.json', KEYS);
  diskDir = join(home.dir, 'kv-disk');
  await mkdir(diskDir);
});

async function complete(server: Server, key: string, prompt: number[]): Promise<{ cached: number; text: string }> {
  const r = (await server
    .client(key)
    .completions.create({ model: 'builtin:tiny', prompt, max_tokens: 8, temperature: 0 })) as OpenAI.Completion;
  return { cached: r.usage?.prompt_tokens_details?.cached_tokens ?? Number.NaN, text: r.choices[0]?.text ?? '' };
}

const metric = async (server: Server, name: string): Promise<number> => (await scrape(server.url)).get(name) ?? NaN;

/** Until every spilled page is on disk (a stop after that loses none). */
async function writesDone(server: Server, atLeast: number): Promise<void> {
  await waitUntil(`${atLeast} pages spilled and written`, async () => {
    const m = await scrape(server.url);
    return (m.get('tessera_kv_disk_pages_spilled') ?? 0) >= atLeast && m.get('tessera_kv_disk_pending_writes') === 0;
  });
}

describe('a server with --kv-disk', () => {
  let first: { cached: number; text: string };

  describe('before a restart', () => {
    let server: Server;
    beforeAll(async () => {
      server = await startServer(['--api-keys', keysFile, '--kv-disk', diskDir, ...ARGS], home.dir);
    });
    afterAll(async () => {
      await server?.stop();
    });

    it("loads a tenant's evicted prefix back from disk: cached_tokens shows it, the greedy output is the same", async () => {
      first = await complete(server, 'sk-alice', PROMPT);
      expect(first.cached).toBe(0);
      for (let i = 0; i < 3; i++) await complete(server, 'sk-bob', promptIds(200, 100 + i));
      await writesDone(server, 4);
      const again = await complete(server, 'sk-alice', PROMPT);
      expect(again).toEqual({ cached: 64, text: first.text });
      expect(await metric(server, 'tessera_kv_disk_pages_loaded')).toBe(4);
    });

    it("gives another tenant's identical prompt no hit", async () => {
      const before = await metric(server, 'tessera_kv_disk_pages_loaded');
      expect((await complete(server, 'sk-bob', PROMPT)).cached).toBe(0);
      expect(await metric(server, 'tessera_kv_disk_pages_loaded')).toBe(before);
      expect((await complete(server, 'sk-bob', HOT)).cached).toBe(0);
    });
  });

  it('hits the disk tier on the first request after a restart on the same directory', async () => {
    const server = await startServer(['--api-keys', keysFile, '--kv-disk', diskDir, ...ARGS], home.dir);
    try {
      expect(await metric(server, 'tessera_kv_disk_pages')).toBeGreaterThanOrEqual(4);
      expect(await complete(server, 'sk-alice', PROMPT)).toEqual({ cached: 64, text: first.text });
      expect(await metric(server, 'tessera_kv_disk_pages_loaded')).toBe(4);
      // Never evicted before the stop: spilled at the stop.
      expect((await complete(server, 'sk-bob', HOT)).cached).toBe(64);
    } finally {
      await server.stop();
    }
  });
});
