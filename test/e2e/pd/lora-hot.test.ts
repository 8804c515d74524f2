// Hot-loading and unloading a LoRA adapter on a disaggregated cluster, real processes and the
// openai client (router/cluster-lora.ts, worker/lora-registry.ts):
//   1. `tessera up` started without the adapter; the admin loads it through the router's
//      /v1/load_lora_adapter for bob alone: bob's `base:c` requests then give the tokens of
//      co-located `serve --lora c=..@bob` (router -> prefill -> KV transfer -> decode, the adapter
//      on both workers); alice gets a 404; unloaded, it is a 404 in OpenAI's error shape and the
//      base model is served on; loaded again, it works again.
//      KV events (/kv-events) name the adapter of each block it computed (lora_id), on serve and
//      on the cluster's prefill.
//   2. An unload while a request streams under the adapter is refused (503) and the stream ends
//      whole; after it, the unload goes through.
//   3. All or nothing: a decode that already holds another file as `c` refuses the load; the
//      router answers 400 naming it, and the prefill that had loaded `c` drops it again (rollback).
//   4. Negative control `lora-no-rollback` on a second router over the same workers: the same
//      failed load leaves `c` on the prefill (a half-loaded cluster).
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genLoraGguf } from '../../../src/engine/index.js';
import { loadModel } from '../../../src/model/index.js';
import { ADMIN_KEY, startServer, writeJson, type Server } from '../support/process.js';
import {
  detail,
  health,
  promptIds,
  spawnTessera,
  startRouter,
  startWorker,
  testHome,
  waitUntil,
  type Proc,
  type Router,
  type Worker,
} from './support.js';

let home: Awaited<ReturnType<typeof testHome>>;
const procs: { stop(): Promise<unknown> }[] = [];
let serve: Server;
let upUrl: string;
let prefill: Worker;
let decode: Worker;
let router: Router;
let faulty: Router;
let cPath: string;
const KEYS = { 'sk-alice': 'alice', 'sk-bob': 'bob' };
const POOL = ['--deterministic', '--kv-pages', '64', '--context-length', '256'];

beforeAll(async () => {
  home = await testHome();
  const { config } = await loadModel('builtin:tiny', { cacheDir: home.dir });
  cPath = join(home.dir, 'c.gguf');
  const aPath = join(home.dir, 'a.gguf');
  await genLoraGguf(config, { out: cPath, rank: 8, seed: 3 });
  await genLoraGguf(config, { out: aPath, rank: 8, seed: 1 });
  const keys = await writeJson(home.dir, 'keys.json', KEYS);
  const front = ['--api-keys', keys];
  const up: Proc = spawnTessera('up', ['up', '--port', '0', ...front, ...POOL], home.dir);
  procs.push(up);
  const byHand = (async () => {
    // A decode that holds another file under the name `c` (its --lora): it refuses the router's load of c.
    [prefill, decode] = await Promise.all([
      startWorker('p-hot', 'prefill', POOL, home.dir),
      startWorker('d-hot', 'decode', [...POOL, '--lora', `c=${aPath}`], home.dir),
    ]);
    procs.push(prefill, decode);
    const routers = await Promise.all([
      startRouter('r-hot', [prefill], [decode], front, home.dir),
      startRouter('r-no-rollback', [prefill], [decode], front, home.dir, {
        TESSERA_ALLOW_FAULTS: '1',
        TESSERA_FAULT: 'lora-no-rollback',
      }),
    ]);
    procs.push(...routers);
    [router, faulty] = routers;
  })();
  const started = await Promise.all([
    startServer([...front, '--lora', `c=${cPath}@bob`, ...POOL], home.dir),
    up.waitFor(/listening on (http:\/\/[\d.]+:\d+)/).then((m) => m[1] as string),
    byHand,
  ]);
  [serve, upUrl] = [started[0], started[1]];
  procs.push(serve);
  await waitUntil('the cluster workers to be up', async () => {
    const workers = (await health(upUrl)).body['workers'] as { state: string }[];
    return workers.length >= 2 && workers.every((w) => w.state === 'up');
  });
}, 120_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await home?.remove();
});

const clientOf = (url: string, key: string) =>
  new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 120_000 });

const admin = (url: string, verb: 'load' | 'unload', body: object, key = ADMIN_KEY) =>
  fetch(`${url}/v1/${verb}_lora_adapter`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

async function complete(client: OpenAI, model: string, prompt: number[]): Promise<string> {
  const r = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0 });
  return r.choices[0]!.text;
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const ids = async (url: string, key: string) => (await clientOf(url, key).models.list()).data.map((m) => m.id);

describe('tessera up: the admin hot-loads and unloads a LoRA adapter through the router', () => {
  it('a tenant key is refused; loaded for bob, `base:c` gives the tokens of serve --lora; unloaded: 404, base on', async () => {
    const load = { lora_name: 'c', lora_path: cPath, tenants: ['bob'] };
    expect((await admin(upUrl, 'load', load, 'sk-bob')).status).toBe(401);
    expect(await ids(upUrl, 'sk-bob')).toEqual(['builtin:tiny']);
    const loaded = await admin(upUrl, 'load', load);
    expect(loaded.status).toBe(200);
    expect(await loaded.json()).toMatchObject({ name: 'c', digest: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(await ids(upUrl, 'sk-bob')).toEqual(['builtin:tiny', 'c']);
    expect(await ids(upUrl, 'sk-alice')).toEqual(['builtin:tiny']);

    const prompt = promptIds(9, 4242);
    const [wantC, wantBase] = await Promise.all(
      ['builtin:tiny:c', 'builtin:tiny'].map((m) => complete(clientOf(serve.url, 'sk-bob'), m, prompt)),
    );
    expect(wantC).not.toBe(wantBase);
    const bob = clientOf(upUrl, 'sk-bob');
    expect(await Promise.all([complete(bob, 'builtin:tiny:c', prompt), complete(bob, 'c', prompt)])).toEqual([
      wantC,
      wantC,
    ]);
    await expect(complete(clientOf(upUrl, 'sk-alice'), 'c', prompt)).rejects.toBeInstanceOf(OpenAI.NotFoundError);

    expect((await admin(upUrl, 'unload', { lora_name: 'c' })).status).toBe(200);
    const gone = await complete(bob, 'builtin:tiny:c', prompt).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
    expect((gone as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({
      type: 'not_found_error',
      code: 'model_not_found',
      param: 'model',
    });
    expect(await complete(bob, 'builtin:tiny', prompt)).toBe(wantBase);
    const again = await admin(upUrl, 'unload', { lora_name: 'c' });
    expect(again.status).toBe(404);
    expect(await again.json()).toMatchObject({ error: { type: 'not_found_error', param: 'lora_name' } });

    // Loaded again under the same name: the workers dropped it and take it again.
    expect((await admin(upUrl, 'load', load)).status).toBe(200);
    expect(await complete(bob, 'c', prompt)).toBe(wantC);
  });

  it("KV events name the adapter a block was computed under (lora_id), on serve and on the cluster's prefill", async () => {
    const prompt = promptIds(40, 7373); // 2 full pages of 16 cached
    const workers = (await health(upUrl)).body['workers'] as { url: string; role: string }[];
    const prefillUrl = workers.find((w) => w.role === 'prefill')!.url;
    for (const [url, node] of [
      [upUrl, prefillUrl],
      [serve.url, serve.url],
    ] as const) {
      await complete(clientOf(url, 'sk-bob'), 'c', prompt);
      await complete(clientOf(url, 'sk-bob'), 'builtin:tiny', promptIds(40, 8484));
      const batch = (await (await fetch(`${node}/kv-events?after=0`, { headers: bearer(ADMIN_KEY) })).json()) as {
        events: { type: string; lora_id?: string | null }[];
      };
      const ids = batch.events.filter((e) => e.type === 'BlockStored').map((e) => e.lora_id);
      expect(ids.filter((id) => id === 'c').length).toBeGreaterThanOrEqual(2);
      expect(ids.filter((id) => id === null).length).toBeGreaterThanOrEqual(2);
      expect(ids.every((id) => id === 'c' || id === null)).toBe(true);
    }
  });

  it('an unload while a request streams under the adapter is refused; the stream ends whole, then it goes', async () => {
    const stream = await clientOf(upUrl, 'sk-bob').completions.create({
      model: 'c',
      prompt: promptIds(9, 99),
      max_tokens: 200,
      temperature: 0,
      ignore_eos: true,
      stream: true,
    } as OpenAI.CompletionCreateParamsStreaming);
    // The stream is open (its first token is out): the request is live at the router.
    const refused = await admin(upUrl, 'unload', { lora_name: 'c' });
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ error: { message: expect.stringMatching(/in use/) } });
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('length');
    expect((await admin(upUrl, 'unload', { lora_name: 'c' })).status).toBe(200);
  });
});

describe('all or nothing: a worker that refuses the load', () => {
  it('fails it with the reason, and the workers that had loaded it drop it again', async () => {
    const failed = await admin(router.url, 'load', { lora_name: 'c', lora_path: cPath });
    expect(failed.status).toBe(400);
    expect(await failed.json()).toMatchObject({
      error: { type: 'invalid_request_error', message: expect.stringMatching(/decode .* refused it.*already loaded/) },
    });
    expect((await detail(prefill))['loraAdapters']).toEqual({});
    expect(Object.keys((await detail(decode))['loraAdapters'] as object)).toEqual(['c']); // its own, kept
    expect(await ids(router.url, 'sk-bob')).toEqual(['builtin:tiny']);
    await expect(complete(clientOf(router.url, 'sk-bob'), 'c', promptIds(9))).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
    expect((await complete(clientOf(router.url, 'sk-bob'), 'builtin:tiny', promptIds(9))).length).toBeGreaterThan(0);
  });

  it('negative control lora-no-rollback: the same failed load leaves c on the prefill', async () => {
    const failed = await admin(faulty.url, 'load', { lora_name: 'c', lora_path: cPath });
    expect(failed.status).toBe(400);
    expect(Object.keys((await detail(prefill))['loraAdapters'] as object)).toEqual(['c']);
  });
});
