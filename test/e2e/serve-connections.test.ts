// Issue 33 against a real `tessera serve`, with raw sockets as an attacker holds them:
//   - a socket that never sends a byte and one that trickles a header line every 300 ms are
//     both closed at the headers bound (here 1 s; 20 s by default), the trickle with a 408 body;
//     a keep-alive connection idle after its answer is closed at the idle bound (here 1.5 s);
//   - with the connection cap (here 40) full of silent sockets, the openai client is still
//     served: the longest-idle ones are closed to make room (before: 503 for every newcomer);
//   - one address holds at most maxIdlePerSource idle connections (here 30): its own oldest go.
// Negative controls at the end: a second `serve` with lax-header-deadline and
// refuse-at-http-cap (through TESSERA_FAULT) keeps the silent socket and the trickle open, and
// refuses the openai client once the cap is full.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Attacker, outcome } from './support/attacker.js';
import { startServer, useTestHome, type Server } from './support/process.js';

const home = useTestHome();
/** Short bounds: what closes a socket there is a deadline. */
let timed: Server;
/** Long bounds, a small cap: what closes a socket there is the cap. */
let capped: Server;
const CAP = 40;
const PER_SOURCE = 30;
/** Longer than any bound of `timed` with its sweep: a socket still open after it was not cut. */
const WATCH_MS = 5_000;
const attacker = new Attacker();

beforeAll(async () => {
  [timed, capped] = await Promise.all([
    startServer(['--context-length', '512'], home.dir, { TESSERA_HTTP_LIMITS: 'headersMs=1000,idleMs=1500' }),
    startServer(['--context-length', '512'], home.dir, {
      TESSERA_HTTP_LIMITS: `maxConnections=${CAP},maxIdlePerSource=${PER_SOURCE}`,
    }),
  ]);
});
afterEach(() => attacker.destroyAll());
afterAll(async () => {
  await Promise.all([timed?.stop(), capped?.stop()]);
});

const port = (of: Server): number => Number(new URL(of.url).port);

/** A silent socket, a slowloris and a keep-alive idle after its answer: how each ended within WATCH_MS. */
const deadlines = (of: Server) => attacker.deadlines(port(of), WATCH_MS);

/** Silent sockets from two addresses up to the cap, then the openai client: its answer, and which silent ones the server closed. */
async function capFullOfSilentSockets(of: Server): Promise<{ answer: string; oldest: string; newest: string }> {
  const flood = await attacker.flood(port(of), CAP, ['127.0.0.2', '127.0.0.3']);
  const answer = await of
    .client()
    .completions.create({ model: 'builtin:tiny', prompt: 'hello', max_tokens: 2 })
    .then(
      (r) => `served (${r.choices[0]?.finish_reason})`,
      (e: unknown) => `refused (${(e as { status?: number }).status})`,
    );
  const [oldest, newest] = await Promise.all([outcome(flood[0]!, WATCH_MS), outcome(flood.at(-1)!, 0)]);
  return { answer, oldest: oldest.closed ? 'closed' : 'open', newest: newest.closed ? 'closed' : 'open' };
}

describe('tessera serve: connections an attacker holds', () => {
  it('closes a silent socket and a slowloris at the headers bound, and an idle keep-alive at the idle bound', async () => {
    expect(await deadlines(timed)).toEqual({
      silent: 'closed',
      slowloris: 'closed 408 request_timeout',
      idle: 'closed',
    });
  });

  it('serves the openai client while silent sockets fill the connection cap, closing the longest-idle', async () => {
    expect(await capFullOfSilentSockets(capped)).toEqual({
      answer: 'served (length)',
      oldest: 'closed',
      newest: 'open',
    });
  });

  it('holds at most maxIdlePerSource idle connections from one address, closing its own oldest', async () => {
    const flood = await attacker.flood(port(capped), PER_SOURCE + 5, ['127.0.0.4']);
    const ends = await Promise.all(flood.slice(0, 5).map((s) => outcome(s, WATCH_MS)));
    expect(ends.map((e) => e.closed)).toEqual([true, true, true, true, true]);
    const rest = flood.slice(5);
    expect(rest.filter((s) => s.destroyed || s.readableEnded)).toHaveLength(0);
  });
});

describe('negative controls: `serve` with lax-header-deadline and refuse-at-http-cap', () => {
  let faulty: Server;
  beforeAll(async () => {
    faulty = await startServer(['--context-length', '512'], home.dir, {
      TESSERA_HTTP_LIMITS: `headersMs=1000,maxConnections=${CAP}`,
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'lax-header-deadline,refuse-at-http-cap',
    });
  });
  afterAll(async () => {
    await faulty?.stop();
  });

  it('a silent socket and a slowloris stay open past the headers bound', async () => {
    const { silent, slowloris } = await deadlines(faulty);
    expect({ silent, slowloris }).toEqual({ silent: 'open', slowloris: 'open' });
  });

  it('with the cap full of silent sockets the openai client is refused, and none of them is closed', async () => {
    expect(await capFullOfSilentSockets(faulty)).toEqual({ answer: 'refused (503)', oldest: 'open', newest: 'open' });
  });
});
