// --api-keys: requests without a valid key get 401; the tenant comes from the key alone; the
// prefix cache is scoped by tenant. Paired: the same tenant (through another key) hits, another
// tenant misses — and under `share-prefix-across-tenants` (the negative control) it hits.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { promptIds, startServer, useTestHome, writeJson, type Server } from './support/process.js';

const home = useTestHome();
let keysFile: string;
const KEYS = { 'sk-alice-1': 'alice', 'sk-alice-2': 'alice', 'sk-bob': 'bob' };
const ARGS = ['--context-length', '256', '--kv-pages', '64'];

beforeAll(async () => {
  keysFile = await writeJson(home.dir, 'keys.json', KEYS);
});

/** cached_tokens of a greedy request for `prompt` sent with `key`. */
async function cachedTokens(server: Server, key: string, prompt: number[]): Promise<number> {
  const r = (await server
    .client(key)
    .completions.create({ model: 'builtin:tiny', prompt, max_tokens: 2, temperature: 0 })) as OpenAI.Completion;
  return r.usage?.prompt_tokens_details?.cached_tokens ?? Number.NaN;
}

describe('a server with --api-keys', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(['--api-keys', keysFile, ...ARGS], home.dir);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('answers 401 without a key or with an unknown one, in the OpenAI error shape', async () => {
    const none = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"prompt":"x","max_tokens":1}',
    });
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_api_key' } });
    await expect(
      server.client('sk-mallory').completions.create({ model: 'builtin:tiny', prompt: 'x', max_tokens: 1 }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(server.client('sk-mallory').models.list()).rejects.toMatchObject({ status: 401 });
  });

  it('serves a valid key', async () => {
    const r = await server.client('sk-bob').completions.create({ model: 'builtin:tiny', prompt: 'x', max_tokens: 1 });
    expect(r.choices).toHaveLength(1);
  });

  it('shares cached prefix pages within a tenant (across its keys) and never across tenants', async () => {
    const prompt = promptIds(70, 7000); // 4 full pages of 16 can be cached (the last token is always computed)
    expect(await cachedTokens(server, 'sk-alice-1', prompt)).toBe(0);
    expect(await cachedTokens(server, 'sk-alice-2', prompt)).toBe(64); // same tenant, other key: hit
    expect(await cachedTokens(server, 'sk-bob', prompt)).toBe(0); // other tenant: miss
    expect(await cachedTokens(server, 'sk-bob', prompt)).toBe(64); // bob's own pages now: hit
  });
});

describe('negative control: share-prefix-across-tenants', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(['--api-keys', keysFile, ...ARGS], home.dir, {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'share-prefix-across-tenants',
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("the other tenant's lookup crosses tenants: no clean miss (the ledger refuses the reference, the worker stops, exit 1)", async () => {
    const prompt = promptIds(70, 9000);
    expect(await cachedTokens(server, 'sk-alice-1', prompt)).toBe(0);
    const bob = cachedTokens(server, 'sk-bob', prompt);
    await expect(bob).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    const exited = await server.exited; // on its own: a broken invariant ends the process
    expect(exited, exited.stderr).toMatchObject({ code: 1, signal: null });
    expect(exited.stderr).toMatch(/ref: page \d+ is not cached for tenant bob; it is cached for tenant alice/);
  });
});
