// http-guard.ts on a real node:http server over loopback, driven by raw sockets as an attacker
// would: framing Node's parser refuses gets an OpenAI-shaped 4xx body; a socket that sends
// nothing and one that trickles header lines are both closed at the headers bound; an idle
// keep-alive connection is closed at the idle bound; at the connection cap the longest-idle
// connection is closed to make room (a 503 only when every connection is answering); one source
// holds at most maxIdlePerSource idle connections. Negative controls: `skip-http-guard`,
// `lax-header-deadline` and `refuse-at-http-cap` each fail their part.
// (test/e2e/serve-robust.test.ts and test/e2e/pd/http-flood.test.ts check it on real processes.)
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS } from '../../core/index.js';
import { guardHttpServer, type HttpLimits } from './http-guard.js';

const LIMITS = { idleMs: 300, headersMs: 2_000, requestMs: 5_000, maxConnections: 4, maxIdlePerSource: 4 };
/** The headers bound short, the idle one longer than any watch: what closes a socket here is the head deadline. */
const HEAD_LIMITS = { ...LIMITS, idleMs: 60_000, headersMs: 300 };
/** Bounds longer than any watch: what closes a socket here is the cap. */
const CAP_LIMITS = { ...LIMITS, idleMs: 60_000, headersMs: 60_000 };
/** How long an idle connection is watched before it counts as never closed. */
const WATCH_MS = 2_000;

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(
    servers.splice(0).map((s) => {
      s.closeAllConnections();
      return new Promise((resolve) => s.close(resolve));
    }),
  );
});

async function guarded(faults: FaultSet, limits: HttpLimits = LIMITS): Promise<number> {
  // A request with a body is answered once the body is in: one whose body never comes stays in progress.
  // Its head goes out at once (the client sees the request taken), its end once the body is in.
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' }).flushHeaders();
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  guardHttpServer(server, limits, faults);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

/** Writes `bytes` on a fresh connection; what came back once it closed, or 'open' after WATCH_MS. */
function exchange(port: number, bytes: string, localAddress = '127.0.0.1'): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress });
    sockets.push(socket);
    let text = '';
    const timer = setTimeout(() => resolve('open'), WATCH_MS);
    socket.on('data', (d) => (text += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => (clearTimeout(timer), resolve(text)));
    if (bytes !== '') socket.write(bytes);
  });
}

/** "STATUS code" of a raw answer: the error's code from an OpenAI body, or "no body". */
function summary(text: string): string {
  if (text === 'open') return 'still open';
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 'no status';
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  try {
    const error = (JSON.parse(body) as { error?: { code?: string; type?: string; message?: string } }).error;
    return `${status} ${error?.code} ${error?.type}${typeof error?.message === 'string' ? '' : ' without a message'}`;
  } catch {
    return `${status} ${body === '' ? 'no body' : 'not JSON'}`;
  }
}

/** Opens a connection from `localAddress` (any 127.x address is this host), resolved once connected. */
function open(port: number, localAddress = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, localAddress }, () => resolve(s));
    s.on('error', () => undefined);
    sockets.push(s);
  });
}

/** Whether the server closed `s` within WATCH_MS. */
function closedByServer(s: Socket): Promise<boolean> {
  if (s.destroyed || s.readableEnded) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), WATCH_MS);
    s.once('close', () => (clearTimeout(timer), resolve(true)));
  });
}

/** A socket that sends a request line, then one header line every 100 ms, never the blank line. */
function slowloris(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    sockets.push(socket);
    let text = '';
    const trickle = setInterval(() => socket.writable && socket.write(`X-Slow-${Date.now()}: 1\r\n`), 100);
    const timer = setTimeout(() => (clearInterval(trickle), resolve('open')), WATCH_MS);
    socket.on('data', (d) => (text += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => (clearInterval(trickle), clearTimeout(timer), resolve(text)));
    socket.write('GET /health HTTP/1.1\r\nHost: x\r\n');
  });
}

/** Whether a keep-alive connection that got its answer is closed afterwards within WATCH_MS. */
async function idleAfterResponse(port: number): Promise<boolean> {
  const s = await open(port);
  const answered = new Promise((resolve) => s.once('data', resolve));
  s.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
  await answered;
  return closedByServer(s);
}

/** The three checks against one server: a bad Content-Length, a silent client, one client past the cap. */
async function hostileClients(faults: FaultSet): Promise<Record<string, string>> {
  const port = await guarded(faults);
  const framing = summary(
    await exchange(port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'),
  );
  const idle = summary(await exchange(port, ''));
  // Every connection answering a request (a body that never comes): the next one is refused.
  const held = await Promise.all(Array.from({ length: LIMITS.maxConnections }, () => open(port)));
  await Promise.all(
    held.map((s) => {
      const taken = new Promise((resolve) => s.once('data', resolve));
      s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n');
      return taken;
    }),
  );
  const pastCap = summary(await exchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
  for (const s of held) s.destroy();
  return { framing, idle, pastCap };
}

/** The head deadline: a silent socket and a slowloris, with an idle bound longer than the watch. */
async function slowHeads(faults: FaultSet): Promise<Record<string, string>> {
  const port = await guarded(faults, HEAD_LIMITS);
  const [silent, trickled] = await Promise.all([exchange(port, ''), slowloris(port)]);
  return { silent: summary(silent), trickled: summary(trickled) };
}

/** Silent sockets up to the cap, then a client: is it served, and which silent ones were closed? */
async function floodThenClient(faults: FaultSet): Promise<{ newcomer: string; closed: boolean[] }> {
  const port = await guarded(faults, CAP_LIMITS);
  const silent: Socket[] = [];
  for (let i = 0; i < LIMITS.maxConnections; i++) silent.push(await open(port, `127.0.0.${2 + i}`));
  // The listener accepts in arrival order: it sees every silent one before the newcomer.
  const newcomer = summary(await exchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
  return { newcomer, closed: await Promise.all(silent.map(closedByServer)) };
}

/** Four silent sockets from one address, then one from another, under a per-source cap of two: which the server closed. */
async function oneSourceFlood(faults: FaultSet): Promise<boolean[]> {
  const port = await guarded(faults, { ...CAP_LIMITS, maxConnections: 16, maxIdlePerSource: 2 });
  const flood: Socket[] = [];
  for (let i = 0; i < 4; i++) flood.push(await open(port, '127.0.0.9'));
  flood.push(await open(port, '127.0.0.1'));
  return Promise.all(flood.map(closedByServer));
}

describe('HTTP hygiene (http-guard.ts)', () => {
  it('answers a framing error with an OpenAI body, closes a silent connection, refuses past the cap with a 503 body', async () => {
    expect(await hostileClients(NO_FAULTS)).toEqual({
      framing: '400 bad_framing invalid_request_error',
      idle: 'no status no body', // closed by the server after idleMs, nothing said
      pastCap: '503 overloaded overloaded_error', // every connection was answering a request
    });
  });

  it('closes a silent socket and a slowloris at the headers bound, whatever the idle bound', async () => {
    expect(await slowHeads(NO_FAULTS)).toEqual({
      silent: 'no status no body',
      trickled: '408 request_timeout invalid_request_error',
    });
  });

  it('closes a keep-alive connection that stays idle after its response', async () => {
    expect(await idleAfterResponse(await guarded(NO_FAULTS))).toBe(true);
  });

  it('at the cap, closes the longest-idle connection to serve a newcomer', async () => {
    expect(await floodThenClient(NO_FAULTS)).toEqual({ newcomer: '200 not JSON', closed: [true, false, false, false] });
  });

  it('holds at most maxIdlePerSource idle connections from one address (its own oldest are closed)', async () => {
    expect(await oneSourceFlood(NO_FAULTS)).toEqual([true, true, false, false, false]);
  });

  it("negative control: with skip-http-guard Node's empty 400, an idle connection left open, and no cap", async () => {
    expect(await hostileClients(new FaultSet(['skip-http-guard']))).toEqual({
      framing: '400 no body',
      idle: 'still open',
      pastCap: '200 not JSON',
    });
  });

  it('negative control: with lax-header-deadline a silent socket and a slowloris stay open', async () => {
    expect(await slowHeads(new FaultSet(['lax-header-deadline']))).toEqual({
      silent: 'still open',
      trickled: 'still open',
    });
  });

  it('negative control: with refuse-at-http-cap the newcomer is refused and one address holds them all', async () => {
    expect(await floodThenClient(new FaultSet(['refuse-at-http-cap']))).toEqual({
      newcomer: '503 overloaded overloaded_error',
      closed: [false, false, false, false],
    });
    expect(await oneSourceFlood(new FaultSet(['refuse-at-http-cap']))).toEqual([false, false, false, false, false]);
  });
});
