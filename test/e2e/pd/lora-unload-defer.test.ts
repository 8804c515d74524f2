// A LoRA adapter unloaded on a decode worker while a request under it is decoding there, real
// processes and the openai client (worker/lora-registry.ts's deferred unload, router/cluster-lora.ts):
// a straggler, as when the router's own unload reaches a worker that still decodes a request the
// router no longer counts. The unload goes through the decode's own admin route (the route the
// router's ClusterLora calls) while the stream is open:
//   - the name goes at once (the decode's /health lists no `c`), but a load of `c` there is refused
//     (503: its weights are still held for the running request);
//   - the stream ends whole with the adapter's tokens: the text of co-located `serve --lora c=...`
//     for the same prompt (router -> prefill -> KV transfer -> decode, the adapter on both);
//   - after it ended the weights are dropped: the same load of `c` on the decode now goes through.
// Negative control `lora-unload-in-use` on a second decode (its own router, the same prefill): the
// weights are dropped under the running request, which then does not end with the adapter's tokens:
// the engine no longer has the adapter its step names, an invariant error that stops the decode worker,
// and the stream ends with an error.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genLoraGguf } from '../../../src/engine/index.js';
import { loadModel } from '../../../src/model/index.js';
import { ADMIN_KEY, startServer, type Server } from '../support/process.js';
import { detail, promptIds, startRouter, startWorker, testHome, type Router, type Worker } from './support.js';

let home: Awaited<ReturnType<typeof testHome>>;
const procs: { stop(): Promise<unknown> }[] = [];
let serve: Server;
let decode: Worker;
let faultyDecode: Worker;
let router: Router;
let faultyRouter: Router;
let cPath: string;
/** Long enough that the unload lands while the decode still runs (checked: the reload is refused then). */
const MAX_TOKENS = 900;
const POOL = ['--deterministic', '--kv-pages', '128', '--context-length', '1024'];

beforeAll(async () => {
  home = await testHome();
  const { config } = await loadModel('builtin:tiny', { cacheDir: home.dir });
  cPath = join(home.dir, 'c.gguf');
  await genLoraGguf(config, { out: cPath, rank: 8, seed: 3 });
  const lora = ['--lora', `c=${cPath}`];
  const faults = { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'lora-unload-in-use' };
  const [prefill, d, dFaulty, s] = await Promise.all([
    startWorker('p-defer', 'prefill', POOL, home.dir),
    startWorker('d-defer', 'decode', POOL, home.dir),
    startWorker('d-defer-faulty', 'decode', POOL, home.dir, faults),
    startServer([...POOL, ...lora], home.dir),
  ]);
  procs.push(prefill, d, dFaulty, s);
  [decode, faultyDecode, serve] = [d, dFaulty, s];
  [router, faultyRouter] = await Promise.all([
    startRouter('r-defer', [prefill], [decode], [], home.dir),
    startRouter('r-defer-faulty', [prefill], [faultyDecode], [], home.dir),
  ]);
  procs.push(router, faultyRouter);
  // Hot-loaded through each router (the shared prefill holds the file under both names).
  for (const [r, name] of [
    [router, 'c'],
    [faultyRouter, 'cf'],
  ] as const) {
    const loaded = await admin(r.url, 'load', { lora_name: name, lora_path: cPath });
    if (loaded.status !== 200) throw new Error(`${r.name}: load of ${name}: ${loaded.status} ${await loaded.text()}`);
  }
}, 120_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await home?.remove();
});

const admin = (url: string, verb: 'load' | 'unload', body: object) =>
  fetch(`${url}/v1/${verb}_lora_adapter`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const REQUEST = {
  model: 'c',
  prompt: promptIds(9, 99),
  max_tokens: MAX_TOKENS,
  temperature: 0,
  ignore_eos: true,
} as const;

/** The co-located answer: the adapter's tokens for REQUEST. */
async function colocated(): Promise<string> {
  const r = await serve.client().completions.create(REQUEST as OpenAI.CompletionCreateParamsNonStreaming);
  expect(r.choices[0]!.finish_reason).toBe('length');
  return r.choices[0]!.text;
}

/**
 * Streams REQUEST under adapter `name` through `via`; once its first token is out (decoding on the decode
 * worker), unloads `name` on `worker` and, with `probe`, reads the names the worker's /health lists and
 * tries to load `name` there again. The stream's text, or the error that ended it.
 */
async function unloadMidStream(
  via: Router,
  worker: Worker,
  name: string,
  probe: boolean,
): Promise<{ text: string; error: unknown; unload: number; reloaded?: Response; namesDuring?: string[] }> {
  const stream = await via.client().completions.create({
    ...REQUEST,
    model: name,
    stream: true,
  } as OpenAI.CompletionCreateParamsStreaming);
  let text = '';
  let error: unknown;
  let unload: Promise<number> | undefined;
  let probed: Promise<{ reloaded: Response; namesDuring: string[] }> | undefined;
  try {
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? '';
      if (unload !== undefined || text === '') continue;
      // Not awaited here: the stream is read on meanwhile (a worker that stops ends it, not these calls).
      unload = admin(worker.url, 'unload', { lora_name: name }).then((r) => r.status);
      if (probe)
        probed = unload.then(async () => ({
          namesDuring: Object.keys(((await detail(worker))['loraAdapters'] ?? {}) as object),
          reloaded: await admin(worker.url, 'load', { lora_name: name, lora_path: cPath }),
        }));
    }
  } catch (e) {
    error = e;
  }
  if (unload === undefined) throw new Error(`the stream ended before its first text: ${text}`);
  return { text, error, unload: await unload, ...(probed === undefined ? {} : await probed) };
}

describe('a decode worker unloads a LoRA adapter a running request decodes with', () => {
  it("the name goes at once, the request ends with the adapter's tokens, the weights go after it", async () => {
    const want = await colocated();
    const run = await unloadMidStream(router, decode, 'c', true);
    expect(run.unload).toBe(200);
    expect(run.namesDuring).toEqual([]);
    // Refused while the request runs: the weights are still held for it (the unload landed mid-decode).
    expect(run.reloaded?.status).toBe(503);
    expect(await run.reloaded?.json()).toMatchObject({
      error: { message: expect.stringMatching(/still run with it/) },
    });
    expect(run.error).toBeUndefined();
    expect(run.text).toBe(want);
    // Ended: the weights were dropped (settle after the step), so the name can be loaded again.
    const again = await admin(decode.url, 'load', { lora_name: 'c', lora_path: cPath });
    expect(again.status).toBe(200);
    expect(Object.keys((await detail(decode))['loraAdapters'] as object)).toEqual(['c']);
  });

  it('negative control lora-unload-in-use: the weights go under the running request, which fails', async () => {
    const want = await colocated();
    const run = await unloadMidStream(faultyRouter, faultyDecode, 'cf', false);
    expect(run.unload).toBe(200);
    expect(run.text).not.toBe(want);
    expect(run.error).toBeInstanceOf(OpenAI.APIError);
    expect(String(run.error)).toMatch(/decode worker stopped after an internal error/);
  });
});
