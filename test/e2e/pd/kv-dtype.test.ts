// PD with --kv-dtype: real processes on loopback.
//   1. A cluster whose prefill and decode both store f16 KV serves greedy requests with the
//      tokens of an all-f32 cluster of the same model, moving half the bytes per prompt token;
//      one of q8_0 KV gives 7 of the 8 (a near-tie of the random model at the last), moving
//      34/128 of them.
//   2. A prefill with f16 KV and a decode with f32 KV are never paired: the router reads
//      kvDtype in /health and answers an honest 500 naming the misconfiguration, before any
//      page is reserved or byte sent. (Decode's own refusal of a KvChunk of another dtype is
//      src/transfer/decode-machine.test.ts's.)
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  detail,
  greedyIds,
  promptIds,
  startRouter,
  startWorker,
  useTestHome,
  transferBytes,
  type Router,
  type Worker,
} from './support.js';

const home = useTestHome();
const procs: { stop(): Promise<unknown> }[] = [];
let p16: Worker, d16: Worker, p32: Worker, d32: Worker, p8: Worker, d8: Worker;
let half: Router, full: Router, mixed: Router, q8: Router;
const POOL = ['--context-length', '256', '--kv-pages', '32', '--deterministic'];
const PROMPT = promptIds(40, 700);

beforeAll(async () => {
  [p16, d16, p32, d32, p8, d8] = await Promise.all([
    startWorker('p-f16', 'prefill', [...POOL, '--kv-dtype', 'f16'], home.dir),
    startWorker('d-f16', 'decode', [...POOL, '--kv-dtype', 'f16'], home.dir),
    startWorker('p-f32', 'prefill', [...POOL, '--kv-dtype', 'f32'], home.dir),
    startWorker('d-f32', 'decode', [...POOL, '--kv-dtype', 'f32'], home.dir),
    startWorker('p-q8', 'prefill', [...POOL, '--kv-dtype', 'q8_0'], home.dir),
    startWorker('d-q8', 'decode', [...POOL, '--kv-dtype', 'q8_0'], home.dir),
  ]);
  procs.push(p16, d16, p32, d32, p8, d8);
  [half, full, mixed, q8] = await Promise.all([
    startRouter('r-f16', [p16], [d16], [], home.dir),
    startRouter('r-f32', [p32], [d32], [], home.dir),
    startRouter('r-mixed', [p16], [d32], [], home.dir),
    startRouter('r-q8', [p8], [d8], [], home.dir),
  ]);
  procs.push(half, full, mixed, q8);
}, 240_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

describe('PD with f16 KV', () => {
  it("serves greedy requests with the all-f32 cluster's tokens, moving half the bytes", async () => {
    const [before16, before32] = [await transferBytes(d16.url), await transferBytes(d32.url)];
    const ids16 = await greedyIds(half.client(), PROMPT, 8);
    const ids32 = await greedyIds(full.client(), PROMPT, 8);
    expect(ids16).toHaveLength(8);
    expect(ids16).toEqual(ids32);
    const [moved16, moved32] = [(await transferBytes(d16.url)) - before16, (await transferBytes(d32.url)) - before32];
    expect(moved16).toBeGreaterThan(0);
    expect(moved16 * 2).toBe(moved32);
  });

  it("q8_0: serves this prompt with the all-f32 cluster's tokens up to a near-tie, moving 34/128 of the bytes", async () => {
    const [before8, before32] = [await transferBytes(d8.url), await transferBytes(d32.url)];
    const ids8 = await greedyIds(q8.client(), PROMPT, 8);
    const ids32 = await greedyIds(full.client(), PROMPT, 8);
    // builtin:tiny's random weights give near-ties: q8_0 (deterministic, the wasm kernels) keeps
    // f32's tokens for 7 of these 8 and parts at the last (measured; unit tests bound the error).
    expect(ids8).toHaveLength(8);
    expect(ids8.slice(0, 7)).toEqual(ids32.slice(0, 7));
    const [moved8, moved32] = [(await transferBytes(d8.url)) - before8, (await transferBytes(d32.url)) - before32];
    expect(moved8).toBeGreaterThan(0);
    expect(moved8 * 128).toBe(moved32 * 34);
  });

  it('never pairs an f16 prefill with an f32 decode: an honest 500 before any page is reserved or byte sent', async () => {
    const [p, d] = [await detail(p16), await detail(d32)];
    expect([p['kvDtype'], d['kvDtype']]).toEqual(['f16', 'f32']);
    const answer = mixed.client().completions.create({ model: 'builtin:tiny', prompt: PROMPT, max_tokens: 4 });
    await expect(answer).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    await expect(answer).rejects.toMatchObject({
      status: 500,
      code: 'config_invalid',
      message: expect.stringMatching(/KV dtype/),
    });
    const after = [await detail(p16), await detail(d32)];
    expect(after.map((x) => x['lastEpoch'])).toEqual([p['lastEpoch'], d['lastEpoch']]);
    expect(after[1]?.transfer['bytesWritten']).toBe(d.transfer['bytesWritten']);
  });
});
