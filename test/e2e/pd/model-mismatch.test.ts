// A misconfigured cluster: prefills and decodes serving different models of one KV shape
// (builtin:tiny, and gen-model's tiny preset with another seed). Their pages have the same
// geometry, so only the model fingerprint tells them apart. Real processes on loopback.
//   1. The router sees the fingerprints in /health and pairs none: an honest 500 naming the
//      misconfiguration, before any Reserve (no ledger epoch moves, no byte moves).
//   2. With the router's check off (skip-model-check on the router), decode's own check of
//      KvDone's fingerprint fails the transfer: 502, no token.
//   3. Negative control: with both off (skip-model-check on the router and on decode), the
//      client gets 200 with tokens decoded from another model's KV, and those tokens differ from
//      what a prefill of decode's own model leads to: the two checks are what stand in between.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genModel } from '../../../src/gen/index.js';
import {
  detail,
  greedyIds,
  health,
  promptIds,
  startRouter,
  startWorker,
  useTestHome,
  type Router,
  type Worker,
} from './support.js';

const home = useTestHome();
const procs: { stop(): Promise<unknown> }[] = [];
let prefill: Worker, decode: Worker, unchecked: Worker, sameModel: Worker;
let checked: Router, decodeChecks: Router, noChecks: Router, consistent: Router;
const POOL = ['--context-length', '256', '--kv-pages', '32', '--deterministic'];
const FAULT = { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'skip-model-check' };
const PROMPT = promptIds(20, 300);

beforeAll(async () => {
  const other = join(home.dir, 'tiny-seed-2');
  await genModel({ preset: 'tiny', format: 'hf', out: other, seed: 2 });
  [prefill, decode, unchecked, sameModel] = await Promise.all([
    startWorker('p-tiny', 'prefill', POOL, home.dir),
    startWorker('d-other', 'decode', ['--model', other, ...POOL], home.dir),
    startWorker('d-other-unchecked', 'decode', ['--model', other, ...POOL], home.dir, FAULT),
    startWorker('p-other', 'prefill', ['--model', other, ...POOL], home.dir),
  ]);
  procs.push(prefill, decode, unchecked, sameModel);
  [checked, decodeChecks, noChecks, consistent] = await Promise.all([
    startRouter('r-checked', [prefill], [decode], [], home.dir),
    startRouter('r-unchecked', [prefill], [decode], [], home.dir, FAULT),
    startRouter('r-none', [prefill], [unchecked], [], home.dir, FAULT),
    startRouter('r-consistent', [sameModel], [decode], [], home.dir),
  ]);
  procs.push(checked, decodeChecks, noChecks, consistent);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

describe('a prefill and a decode serving different models', () => {
  it('report different fingerprints for one KV shape', async () => {
    const [p, d, same] = await Promise.all([detail(prefill), detail(decode), detail(sameModel)]);
    expect(p['kvBytesPerToken']).toBe(d['kvBytesPerToken']);
    expect(p['modelFingerprint']).toMatch(/^[0-9a-f]{16}$/);
    expect(p['modelFingerprint']).not.toBe(d['modelFingerprint']);
    expect(same['modelFingerprint']).toBe(d['modelFingerprint']);
  });

  it('are never paired by the router: an honest 500 before any page is reserved or byte sent', async () => {
    const before = await Promise.all([detail(prefill), detail(decode)]);
    const answer = checked.client().completions.create({ model: 'builtin:tiny', prompt: PROMPT, max_tokens: 4 });
    await expect(answer).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    await expect(answer).rejects.toMatchObject({
      status: 500,
      code: 'config_invalid',
      message: expect.stringMatching(/same model/),
    });
    const after = await Promise.all([detail(prefill), detail(decode)]);
    expect(after.map((d) => d['lastEpoch'])).toEqual(before.map((d) => d['lastEpoch']));
    // and its join checks said so at start: in /health and the log. Which of the two is the
    // reference is the first to answer its poll (the first listed on a tie, when both answer the
    // first poll): under load the prefill's poll may time out, and then decode is the reference.
    const workers = (await health(checked.url)).body['workers'] as { role: string; state: string; error?: string }[];
    expect(workers.map((w) => w.role)).toEqual(['prefill', 'decode']);
    expect(workers.map((w) => w.state).sort()).toEqual(['misconfigured', 'up']);
    const refused = workers.find((w) => w.state === 'misconfigured');
    expect(refused?.error).toMatch(/^not admitted: its model fingerprint [0-9a-f]{16} differs from http/);
    expect(checked.stderr()).toMatch(
      new RegExp(`${refused?.role} http:\\S+ not admitted \\(never paired\\): its model fingerprint`),
    );
    expect(after[1]?.transfer['bytesWritten']).toBe(before[1]?.transfer['bytesWritten']);
  });

  it("paired anyway (the router's check off), fail at decode's KvDone check: 502, no token", async () => {
    const answer = decodeChecks.client().completions.create({ model: 'builtin:tiny', prompt: PROMPT, max_tokens: 4 });
    await expect(answer).rejects.toMatchObject({
      status: 502,
      code: 'transfer_failed',
      message: expect.stringMatching(/another model/),
    });
  });

  it("negative control: with both checks off, the client gets 200 with tokens from another model's KV", async () => {
    const mixed = await greedyIds(noChecks.client(), PROMPT, 8);
    const right = await greedyIds(consistent.client(), PROMPT, 8);
    expect(mixed).toHaveLength(8);
    expect(right).toHaveLength(8);
    expect(mixed).not.toEqual(right);
  });
});
