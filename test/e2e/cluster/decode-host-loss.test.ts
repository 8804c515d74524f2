// Host loss on the decode side: one of two decode hosts has its link set down under load (no
// socket is closed: its packets are simply lost), with one prefill host and a router host.
//   detection  the router sees d1 gone (MAX_SLOW_POLLS health polls of 2 s time out, polled every
//              1 s) and closes its connection (pd-router.ts #onDown): measured, bound about 8 s
//   cost       every request was streaming (each had its first token, which comes through its
//              decode) when the link went down: exactly those on d1 fail, each with an error in
//              its stream (never a clean end, never a hang); those on d2 finish with the tokens
//              of a reference run of the same prompts
//   pages      once idle, the surviving prefill and decode hold no page (allocated or quarantined)
//   rejoin     its link back up, d1 is seen up again, takes requests, and it too ends with no page held
// Negative control: a router with `ignore-host-loss` keeps its connection to d1 open: its stream
// on d1 is still waiting when the first router's requests on d1 have long failed.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allIdle, detail, greedyIds, health, promptIds, useTestHome, waitUntil } from '../pd/support.js';
import { ADMIN_KEY } from '../support/process.js';
import {
  createLan,
  namespacesOrWarn,
  routerWorkers,
  startGuardedAndUnguarded,
  startWorkerOn,
  type HostRouter,
  type HostWorker,
  type Lan,
} from './support.js';

const unavailable = namespacesOrWarn('test/e2e/cluster/decode-host-loss.test.ts');

const ARGS = ['--context-length', '1024', '--kv-pages', '256', '--deterministic'];
const ENV = { TESSERA_PD_TIMEOUTS: 'abortAckMs=1500,abortRetries=1,ackMs=3000' };
/** MAX_SLOW_POLLS (3) polls timing out after 2 s each, one started every 1 s, plus the poll in flight. */
const DETECTION_BOUND_MS = 8_000;
const MAX_TOKENS = 400;
const PROMPTS = [0, 1, 2, 3, 4, 5].map((i) => promptIds(40, 5150 + i));

const home = useTestHome();
let lan: Lan | undefined;
const procs: { stop(): Promise<unknown> }[] = [];
let p1: HostWorker, d1: HostWorker, d2: HostWorker;
let router: HostRouter, unguarded: HostRouter;

beforeAll(async () => {
  if (unavailable !== undefined) return;
  const l = createLan();
  lan = l;
  [p1, d1, d2] = await Promise.all([
    startWorkerOn(l.host('p1'), 'prefill', ARGS, home.dir, ENV),
    startWorkerOn(l.host('d1'), 'decode', ARGS, home.dir, ENV),
    startWorkerOn(l.host('d2'), 'decode', ARGS, home.dir, ENV),
  ]);
  procs.push(p1, d1, d2);
  [router, unguarded] = await startGuardedAndUnguarded(
    l,
    { prefills: [p1], decodes: [d1, d2], args: ['--context-length', '1024'], env: ENV },
    { prefills: [p1], decodes: [d1], args: ['--context-length', '1024'], env: ENV },
    home.dir,
  );
  procs.push(router, unguarded);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  lan?.close();
});

interface Streamed {
  /** The client rid (the chunks' id is cmpl-<rid>). */
  rid: string;
  ids: number[];
  chunks: number;
  finishReason: string | null;
  outcome: 'finished' | { error: string };
  endedAt: number;
}

/** A streamed greedy completion; resolves how it ended (never throws). */
function stream(client: OpenAI, prompt: readonly number[]): { live: Streamed; done: Promise<Streamed> } {
  const live: Streamed = {
    rid: '',
    ids: [],
    chunks: 0,
    finishReason: null,
    outcome: { error: 'not ended' },
    endedAt: 0,
  };
  const body = {
    model: 'builtin:tiny',
    prompt: [...prompt],
    max_tokens: MAX_TOKENS,
    temperature: 0,
    ignore_eos: true,
    return_token_ids: true,
    stream: true,
  };
  const done = (async () => {
    try {
      const chunks = (await client.completions.create(body as never)) as unknown as AsyncIterable<{
        id: string;
        choices: { token_ids?: number[]; finish_reason: string | null }[];
      }>;
      for await (const c of chunks) {
        live.rid = c.id.replace(/^cmpl-/, '');
        live.chunks++;
        live.ids.push(...(c.choices[0]?.token_ids ?? []));
        live.finishReason = c.choices[0]?.finish_reason ?? live.finishReason;
      }
      live.outcome = 'finished';
    } catch (e) {
      live.outcome = { error: String(e) };
    }
    live.endedAt = Date.now();
    return live;
  })();
  return { live, done };
}

/** The router's pairs in flight (its admin-only cluster map): attempt rid -> decode address. */
async function pairs(r: HostRouter): Promise<{ rid: string; decode: string }[]> {
  const response = await fetch(`${r.url}/dashboard/state`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  return ((await response.json()) as { map: { pairs: { rid: string; decode: string }[] } }).map.pairs;
}

describe.skipIf(unavailable !== undefined)('a decode host lost under load (link down)', () => {
  it('is detected within the bound; costs only the requests it held, each with an honest error; no page stays held; it rejoins', async () => {
    const reference = await Promise.all(PROMPTS.map((p) => greedyIds(router.client(), p, MAX_TOKENS)));
    await allIdle([p1, d1, d2], 30_000);
    const control = stream(unguarded.client(), promptIds(40, 6262));
    const load = PROMPTS.map((p) => stream(router.client(), p));
    await waitUntil(
      'every stream to have its first token',
      async () => [control, ...load].every((s) => s.live.ids.length > 0),
      60_000,
    );
    const inFlight = await pairs(router);
    const onD1 = new Set(inFlight.filter((p) => p.decode === d1.address).map((p) => p.rid));
    const onD2 = new Set(inFlight.filter((p) => p.decode === d2.address).map((p) => p.rid));
    const down = Date.now();
    d1.host.linkDown();
    expect(onD1.size).toBeGreaterThan(0);
    expect(onD2.size).toBeGreaterThan(0);
    expect(load.every((s) => onD1.has(s.live.rid) || onD2.has(s.live.rid))).toBe(true); // still streaming, each on one

    await waitUntil(
      'the router to see d1 down',
      async () => (await routerWorkers(router)).find((w) => w.url === d1.url)?.state === 'down',
      30_000,
    );
    const detectedMs = Date.now() - down;
    const ended = await Promise.all(load.map((s) => s.done));
    const lastMs = Math.max(...ended.map((s) => s.endedAt)) - down;
    console.log(
      `[measured under contention] decode host loss: seen down ${detectedMs} ms after link down; ` +
        `${onD1.size} streams on d1 failed, ${onD2.size} on d2 finished, all ended ${lastMs} ms after it`,
    );
    expect(detectedMs).toBeLessThan(DETECTION_BOUND_MS + 2_000);
    expect(lastMs).toBeLessThan(DETECTION_BOUND_MS + 5_000); // no hang
    ended.forEach((s, i) => {
      if (onD1.has(s.rid)) {
        // an honest error in the stream: never a clean end, never a finish_reason
        expect(s.outcome, s.rid).toEqual({
          error: expect.stringContaining(`the connection to decode ${d1.address} closed (the router marked`),
        });
        expect(s.finishReason).toBeNull();
        expect(s.ids.length).toBeLessThan(MAX_TOKENS);
        expect(reference[i]?.slice(0, s.ids.length)).toEqual(s.ids); // what did arrive was right
      } else {
        expect(s.outcome, s.rid).toBe('finished');
        expect(s.ids).toEqual(reference[i]);
      }
    });
    // Negative control: the unguarded router still waits on d1.
    const controlState = await Promise.race([
      control.done.then((s) => s.outcome),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2_000)),
    ]);
    expect(controlState).toBe('still waiting');
    // The survivors hold no page once idle (prefill's sources were acknowledged; d2's requests ended).
    await waitUntil('the router to be idle', async () => (await health(router.url)).body['idle'] === true, 30_000);
    await allIdle([p1, d2], 30_000);

    d1.host.linkUp();
    await waitUntil(
      'the router to see d1 up again',
      async () => (await routerWorkers(router)).find((w) => w.url === d1.url)?.state === 'up',
      30_000,
    );
    await Promise.race([control.done, new Promise((resolve) => setTimeout(resolve, 30_000))]);
    await allIdle([p1, d1, d2], 30_000);
    const before = Number((await detail(d1))['steps']);
    await waitUntil(
      'd1 to take requests again',
      async () => {
        await Promise.all([0, 1].map((i) => greedyIds(router.client(), promptIds(30, (Date.now() % 997) + i), 4)));
        return Number((await detail(d1))['steps']) > before;
      },
      30_000,
    );
    await allIdle([p1, d1, d2], 30_000);
  });
});
