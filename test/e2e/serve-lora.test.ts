// Multi-LoRA on `tessera serve` with the openai client: two adapters (`--lora`, one restricted to
// a tenant of --api-keys) and the base model in concurrent requests, each answer equal to its own
// single-request answer (--deterministic: rows do not depend on their batch; the adapters' terms
// are per row); /v1/models per tenant; an unknown or another tenant's adapter is a 404. The adapter
// is part of the KV namespace: a prompt cached under adapter a is not reused under b (cached_tokens
// 0, b's own answer); under `lora-drop-from-key` (the negative control) it is, and b answers wrong.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genLoraGguf } from '../../src/engine/index.js';
import { loadModel } from '../../src/model/index.js';
import { promptIds, startServer, testHome, writeJson, type Server } from './support/process.js';

let home: Awaited<ReturnType<typeof testHome>>;
let args: string[];
const KEYS = { 'sk-alice': 'alice', 'sk-bob': 'bob' };
const ADMIN = 'sk-admin-lora-test';
const PROMPT = promptIds(40, 4242); // 2 full pages of 16 can be cached

beforeAll(async () => {
  home = await testHome();
  const { config } = await loadModel('builtin:tiny', { cacheDir: home.dir });
  const [a, b] = [join(home.dir, 'a.gguf'), join(home.dir, 'b.gguf')];
  await genLoraGguf(config, { out: a, rank: 8, seed: 1 });
  await genLoraGguf(config, { out: b, rank: 8, seed: 2, dtype: 'f16' });
  await genLoraGguf(config, { out: join(home.dir, 'c.gguf'), rank: 4, seed: 3 });
  const keys = await writeJson(home.dir, 'keys.json', KEYS);
  args = ['--api-keys', keys, '--admin-key', ADMIN, '--deterministic', '--kv-pages', '64', '--context-length', '256'];
  args.push('--lora', `a=${a}`, '--lora', `b=${b}@alice`);
});
afterAll(async () => {
  await home?.remove();
});

async function complete(server: Server, model: string, prompt: number[] = PROMPT, key = 'sk-alice') {
  const r = await server.client(key).completions.create({ model, prompt, max_tokens: 12, temperature: 0 });
  return { text: r.choices[0]!.text, cached: r.usage?.prompt_tokens_details?.cached_tokens ?? Number.NaN };
}

describe('serve --lora', () => {
  let server: Server;
  const solo = new Map<string, string>();
  beforeAll(async () => {
    server = await startServer(args, home.dir);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('lists the adapters each tenant may use as vLLM does (id the name, parent the base); a restricted or unknown adapter is a 404', async () => {
    const ids = async (key: string) => (await server.client(key).models.list()).data.map((m) => m.id);
    expect(await ids('sk-alice')).toEqual(['builtin:tiny', 'a', 'b']);
    expect(await ids('sk-bob')).toEqual(['builtin:tiny', 'a']);
    expect(await server.client('sk-bob').models.retrieve('a')).toMatchObject({ id: 'a', parent: 'builtin:tiny' });
    await expect(server.client('sk-bob').models.retrieve('b')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(complete(server, 'b', PROMPT, 'sk-bob')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(complete(server, 'builtin:tiny:nope')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('base, a and b answer differently alone, and each the same in one concurrent mix', async () => {
    const models = ['builtin:tiny', 'builtin:tiny:a', 'b'];
    const prompt = promptIds(9, 777); // no full page: nothing cached between them
    for (const model of models) solo.set(model, (await complete(server, model, prompt)).text);
    expect(new Set(solo.values()).size).toBe(3);
    const mixed = await Promise.all([...models, ...models].map((model) => complete(server, model, prompt)));
    expect(mixed.map((r) => r.text)).toEqual([...models, ...models].map((m) => solo.get(m)));
  });

  it('a prefix cached under adapter a is not reused under b or the base model', async () => {
    const freshB = await complete(server, 'b');
    const freshBase = await complete(server, 'builtin:tiny', promptIds(40, 5151));
    expect((await complete(server, 'a', promptIds(40, 5151))).cached).toBe(0);
    expect(await complete(server, 'a', promptIds(40, 5151))).toMatchObject({ cached: 32 }); // a's own pages: a hit
    expect(await complete(server, 'builtin:tiny', promptIds(40, 5151))).toEqual({ ...freshBase, cached: 32 });
    expect(await complete(server, 'b')).toEqual({ ...freshB, cached: 32 }); // b's own pages, not a's
  });
});

describe('serve: the admin hot-loads and unloads an adapter', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(args, home.dir);
  });
  afterAll(async () => {
    await server?.stop();
  });

  const post = (path: string, key: string, body: object) =>
    fetch(`${server.url}/v1/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('a tenant key is refused; the admin loads c for bob alone, bob uses it, the admin unloads it: 404 after', async () => {
    const load = { lora_name: 'c', lora_path: join(home.dir, 'c.gguf'), tenants: ['bob'] };
    expect((await post('load_lora_adapter', 'sk-alice', load)).status).toBe(401);
    const bad = await post('load_lora_adapter', ADMIN, { ...load, lora_path: join(home.dir, 'keys.json') });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { type: 'invalid_request_error', param: 'lora_path' } });
    const loaded = await post('load_lora_adapter', ADMIN, load);
    expect(loaded.status).toBe(200);
    expect(await loaded.json()).toMatchObject({ name: 'c', digest: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect((await complete(server, 'builtin:tiny:c', PROMPT, 'sk-bob')).text.length).toBeGreaterThan(0);
    await expect(complete(server, 'c', PROMPT, 'sk-alice')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    expect((await post('unload_lora_adapter', ADMIN, { lora_name: 'c' })).status).toBe(200);
    await expect(complete(server, 'c', PROMPT, 'sk-bob')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    expect((await post('unload_lora_adapter', ADMIN, { lora_name: 'c' })).status).toBe(404);
  });
});

describe('negative control: lora-drop-from-key', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(args, home.dir, { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'lora-drop-from-key' });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a reuses the KV that b computed for the prompt and answers wrong (its clean answer: from another tenant)', async () => {
    const prompt = promptIds(40, 6262);
    const cleanA = await complete(server, 'a', prompt, 'sk-bob'); // bob's own namespace: a from scratch
    expect((await complete(server, 'b', prompt)).cached).toBe(0); // alice, under b: cached
    const wrongA = await complete(server, 'a', prompt); // alice, under a: reads b's pages
    expect(cleanA.cached).toBe(0);
    expect(wrongA.cached).toBe(32);
    expect(wrongA.text).not.toBe(cleanA.text);
  });
});
