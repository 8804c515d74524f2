// Multi-LoRA through a disaggregated cluster, real processes and the openai client:
//   1. `tessera up --lora a=.. --lora b=..@alice` beside co-located `tessera serve` with the same
//      flags: /v1/models lists the adapters by name with their parent (vLLM's ids), per tenant;
//      a concurrent mix of base, a and b requests gives, through router -> prefill -> KV transfer
//      -> decode, the same greedy text as serve (--deterministic), each under its own adapter; a
//      prefix prefill cached under a is not reused under b (cached_tokens 0, serve's b text).
//   2. A worker holding another file under the name, or none, refuses the adapter honestly (500
//      naming the digests, 404 naming the flag), behind a router whose own check (it pairs only
//      workers whose /health lists the adapter's digest) is off; the base model is served on.
//   3. Negative control `lora-drop-from-key` on every process: the prefill reuses b's KV for a
//      (cached 32) and a answers wrong.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genLoraGguf } from '../../../src/engine/index.js';
import { loadModel } from '../../../src/model/index.js';
import { writeJson } from '../support/process.js';
import {
  promptIds,
  startRouter,
  startWorker,
  testHome,
  upBesideServe,
  type Router,
  type UpBesideServe,
} from './support.js';

let home: Awaited<ReturnType<typeof testHome>>;
let args: string[];
const procs: { stop(): Promise<unknown> }[] = [];
let c: UpBesideServe;
let router: Router;
let faulty: Router;
const KEYS = { 'sk-alice': 'alice', 'sk-bob': 'bob' };
const POOL = ['--deterministic', '--kv-pages', '64', '--context-length', '256'];

beforeAll(async () => {
  home = await testHome();
  const { config } = await loadModel('builtin:tiny', { cacheDir: home.dir });
  const [loraA, loraB] = [join(home.dir, 'a.gguf'), join(home.dir, 'b.gguf')];
  await genLoraGguf(config, { out: loraA, rank: 8, seed: 1 });
  await genLoraGguf(config, { out: loraB, rank: 8, seed: 2, dtype: 'f16' });
  await genLoraGguf(config, { out: join(home.dir, 'c.gguf'), rank: 8, seed: 3 });
  const keys = await writeJson(home.dir, 'keys.json', KEYS);
  const front = ['--api-keys', keys, '--lora', `a=${loraA}`, '--lora', `b=${loraB}@alice`]; // what a router takes
  args = [...front, ...POOL];
  // The clean cluster (`up`) and serve; beside them, by hand, a cluster with the fault armed on every
  // process, and a second router pairing its prefill with a decode that holds another file as `a`
  // and no `b` (both refused at decode's Reserve: the prefill, fault or not, never sees them).
  const env = { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'lora-drop-from-key' };
  const lora = ['--lora', `a=${loraA}`, '--lora', `b=${loraB}`];
  const byHand = (async () => {
    const [prefill, decode, otherDecode] = await Promise.all([
      startWorker('p-fault', 'prefill', [...POOL, ...lora], home.dir, env),
      startWorker('d-fault', 'decode', [...POOL, ...lora], home.dir, env),
      startWorker('d-other-a', 'decode', [...POOL, '--lora', `a=${join(home.dir, 'c.gguf')}`], home.dir),
    ]);
    procs.push(prefill, decode, otherDecode);
    const routers = await Promise.all([
      startRouter('r-fault', [prefill], [decode], front, home.dir, env),
      // skip-model-check: the router pairs them anyway (its own adapter check: pair-policy.test.ts),
      // so what refuses here is the worker's check.
      startRouter('r-other', [prefill], [otherDecode], lora, home.dir, {
        TESSERA_ALLOW_FAULTS: '1',
        TESSERA_FAULT: 'skip-model-check',
      }),
    ]);
    procs.push(...routers);
    return routers;
  })();
  [c, [faulty, router]] = await Promise.all([upBesideServe(args, home.dir), byHand]);
  procs.push(c);
}, 60_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await home?.remove();
});

const clientOf = (url: string, key: string) =>
  new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 120_000 });

async function complete(client: OpenAI, model: string, prompt: number[]) {
  const r = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0 });
  return { text: r.choices[0]!.text, cached: r.usage?.prompt_tokens_details?.cached_tokens ?? Number.NaN };
}

describe('tessera up --lora', () => {
  it("lists the adapters each tenant may use by name, parent the base; another tenant's adapter is a 404", async () => {
    const ids = async (key: string) => (await clientOf(c.routerUrl, key).models.list()).data.map((m) => m.id);
    expect(await ids('sk-alice')).toEqual(['builtin:tiny', 'a', 'b']);
    expect(await ids('sk-bob')).toEqual(['builtin:tiny', 'a']);
    const b = (await clientOf(c.routerUrl, 'sk-alice').models.list()).data[2];
    expect(b).toMatchObject({ id: 'b', parent: 'builtin:tiny' });
    await expect(complete(clientOf(c.routerUrl, 'sk-bob'), 'b', promptIds(5))).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
  });

  it('a concurrent mix of base, a and b gives the tokens co-located serve gives with each adapter', async () => {
    const models = ['builtin:tiny', 'builtin:tiny:a', 'b', 'a'];
    const prompt = promptIds(9, 777); // no full page: nothing cached between them
    const co = c.colocated.client('sk-alice');
    const want = await Promise.all(models.map(async (m) => (await complete(co, m, prompt)).text));
    expect(new Set(want).size).toBe(3); // base, a, b differ; a by either name is a
    const pd = clientOf(c.routerUrl, 'sk-alice');
    const got = await Promise.all([...models, ...models].map((m) => complete(pd, m, prompt)));
    expect(got.map((r) => r.text)).toEqual([...want, ...want]);
  });

  it("a prompt prefill cached under a is not reused under b or the base model; a's own pages are", async () => {
    const prompt = promptIds(40, 5151); // 2 full pages of 16 can be cached
    const co = c.colocated.client('sk-alice');
    const pd = clientOf(c.routerUrl, 'sk-alice');
    const [wantA, wantB, wantBase] = await Promise.all(['a', 'b', 'builtin:tiny'].map((m) => complete(co, m, prompt)));
    expect(await complete(pd, 'a', prompt)).toEqual({ ...wantA, cached: 0 });
    expect(await complete(pd, 'b', prompt)).toEqual({ ...wantB, cached: 0 });
    expect(await complete(pd, 'builtin:tiny', prompt)).toEqual({ ...wantBase, cached: 0 });
    expect(await complete(pd, 'a', prompt)).toEqual({ ...wantA, cached: 32 });
  });
});

describe('a worker without the adapter, or with another file under its name', () => {
  it('refuses it with an honest error and serves the base model on', async () => {
    const client = router.client();
    const other = await complete(client, 'a', promptIds(20)).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(OpenAI.InternalServerError);
    expect(String((other as Error).message)).toMatch(
      /decode worker serves LoRA adapter a with digest [0-9a-f]{32}, the router [0-9a-f]{32}/,
    );
    const none = await complete(client, 'b', promptIds(20)).catch((e: unknown) => e);
    expect(none).toBeInstanceOf(OpenAI.NotFoundError);
    expect(String((none as Error).message)).toMatch(/does not serve the LoRA adapter b: start it with --lora b=PATH/);
    expect((await complete(client, 'builtin:tiny', promptIds(20))).text.length).toBeGreaterThan(0);
  });
});

describe('negative control: lora-drop-from-key on the cluster', () => {
  it('a reuses the KV that b computed on the prefill and answers wrong', async () => {
    const prompt = promptIds(40, 6262);
    const cleanA = await complete(faulty.client('sk-bob'), 'a', prompt); // bob's own namespace: a from scratch
    expect((await complete(faulty.client('sk-alice'), 'b', prompt)).cached).toBe(0);
    const wrongA = await complete(faulty.client('sk-alice'), 'a', prompt); // alice under a: b's pages
    expect(cleanA.cached).toBe(0);
    expect(wrongA.cached).toBe(32);
    expect(wrongA.text).not.toBe(cleanA.text);
  });
});
