// Issue 33's connection bounds on a cluster's HTTP listeners (the router's, and each worker's
// HTTP port), with raw sockets as an attacker holds them against real processes, as
// test/e2e/serve-connections.test.ts does against `serve`:
//   - on the router, the prefill and the decode: a socket that never sends a byte and one that
//     trickles a header line every 300 ms are closed at the headers bound (here 1 s), the trickle
//     with a 408; a keep-alive connection idle after its answer is closed at the idle bound (1.5 s);
//   - a router whose connection cap (here 40) is full of silent sockets still serves the openai
//     client, closing the longest-idle ones to make room.
// Negative controls at the end: a router and a prefill with lax-header-deadline and
// refuse-at-http-cap (through TESSERA_FAULT) keep the silent socket and the trickle open, and the
// router refuses the openai client once its cap is full.
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Attacker, outcome } from '../support/attacker.js';
import { startRouter, startWorker, useTestHome, type Router, type Worker } from './support.js';

const home = useTestHome();
const CAP = 40;
/** Longer than any bound here with its sweep: a socket still open after it was not cut. */
const WATCH_MS = 5_000;
const TIMED = { TESSERA_HTTP_LIMITS: 'headersMs=1000,idleMs=1500' };
const attacker = new Attacker();
const procs: { stop(): Promise<unknown> }[] = [];
let prefill: Worker, decode: Worker, timedRouter: Router, cappedRouter: Router;

beforeAll(async () => {
  const args = ['--context-length', '512'];
  [prefill, decode] = await Promise.all([
    startWorker('prefill', 'prefill', args, home.dir, TIMED),
    startWorker('decode', 'decode', args, home.dir, TIMED),
  ]);
  procs.push(prefill, decode);
  [timedRouter, cappedRouter] = await Promise.all([
    startRouter('router-timed', [prefill], [decode], [], home.dir, TIMED),
    startRouter('router-capped', [prefill], [decode], [], home.dir, {
      TESSERA_HTTP_LIMITS: `maxConnections=${CAP},maxIdlePerSource=${CAP}`,
    }),
  ]);
  procs.push(timedRouter, cappedRouter);
});
afterEach(() => attacker.destroyAll());
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

const port = (of: { url: string }): number => Number(new URL(of.url).port);

/** A silent socket, a slowloris and a keep-alive idle after its answer: how each ended within WATCH_MS. */
const deadlines = (of: { url: string }) => attacker.deadlines(port(of), WATCH_MS);

/**
 * Silent sockets from two addresses up to the cap, then the openai client on a connection of its
 * own: its answer, and whether the oldest silent one was closed. (On the shared pool of this test
 * process's fetch, the client would reuse the keep-alive connection left by startRouter's health
 * polls, which the flood's last socket closed to make room: a reset no new connection caused.)
 */
async function capFullOfSilentSockets(router: Router): Promise<{ answer: string; oldest: string }> {
  const flood = await attacker.flood(port(router), CAP, ['127.0.0.2', '127.0.0.3']);
  const agent = new Agent();
  const client = new OpenAI({
    baseURL: `${router.url}/v1`,
    apiKey: 'none',
    maxRetries: 0,
    fetch: ((url: string, init: object) => undiciFetch(url, { ...init, dispatcher: agent })) as never,
  });
  const answer = await client.completions.create({ model: 'builtin:tiny', prompt: 'hello', max_tokens: 2 }).then(
    (r) => `served (${r.choices[0]?.finish_reason})`,
    (e: unknown) => `refused (${(e as { status?: number }).status ?? String(e)})`,
  );
  await agent.close();
  const oldest = await outcome(flood[0]!, WATCH_MS);
  return { answer, oldest: oldest.closed ? 'closed' : 'open' };
}

describe("a cluster's HTTP listeners: connections an attacker holds", () => {
  it.each([
    ['the router', () => timedRouter],
    ['the prefill worker', () => prefill],
    ['the decode worker', () => decode],
  ])('%s closes a silent socket and a slowloris at the headers bound, and an idle keep-alive', async (_, of) => {
    expect(await deadlines(of())).toEqual({
      silent: 'closed',
      slowloris: 'closed 408 request_timeout',
      idle: 'closed',
    });
  });

  it('the router serves the openai client while silent sockets fill its connection cap, closing the longest-idle', async () => {
    expect(await capFullOfSilentSockets(cappedRouter)).toEqual({ answer: 'served (length)', oldest: 'closed' });
  });
});

describe('negative controls: a router and a prefill with lax-header-deadline and refuse-at-http-cap', () => {
  const FAULTS = { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'lax-header-deadline,refuse-at-http-cap' };
  let faultyRouter: Router;
  let faultyPrefill: Worker;
  beforeAll(async () => {
    [faultyRouter, faultyPrefill] = await Promise.all([
      startRouter('router-faulty', [prefill], [decode], [], home.dir, {
        ...FAULTS,
        TESSERA_HTTP_LIMITS: `headersMs=1000,maxConnections=${CAP}`,
      }),
      // Without the idle bound of TIMED: with lax-header-deadline a silent socket waits out idleMs.
      startWorker('prefill-faulty', 'prefill', ['--context-length', '512'], home.dir, {
        ...FAULTS,
        TESSERA_HTTP_LIMITS: 'headersMs=1000',
      }),
    ]);
    procs.push(faultyRouter, faultyPrefill);
  });

  it.each([
    ['the router', () => faultyRouter],
    ['the prefill worker', () => faultyPrefill],
  ])('%s keeps a silent socket and a slowloris open past the headers bound', async (_, of) => {
    const { silent, slowloris } = await deadlines(of());
    expect({ silent, slowloris }).toEqual({ silent: 'open', slowloris: 'open' });
  });

  it('the router refuses the openai client with its cap full of silent sockets, closing none', async () => {
    expect(await capFullOfSilentSockets(faultyRouter)).toEqual({ answer: 'refused (503)', oldest: 'open' });
  });
});
