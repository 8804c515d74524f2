// http-guard.ts on a real node:http server over loopback: framing Node's parser refuses gets an
// OpenAI-shaped 4xx body, a connection that sends nothing is closed after idleMs, and past the
// connection cap a new client gets a 503 with a body at once. The negative control
// `skip-http-guard` (Node's defaults, as before the guard) fails each of the three.
// (test/e2e/serve-robust.test.ts checks the same against a real `tessera serve`.)
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS } from '../core/index.js';
import { guardHttpServer } from './http-guard.js';

const LIMITS = { idleMs: 300, headersMs: 2_000, requestMs: 5_000, maxConnections: 4 };
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

async function guarded(faults: FaultSet): Promise<number> {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
  guardHttpServer(server, LIMITS, faults);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

/** Writes `bytes` on a fresh connection; what came back once it closed, or 'open' after WATCH_MS. */
function exchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
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

/** The three checks against one server: a bad Content-Length, a silent client, one client past the cap. */
async function hostileClients(faults: FaultSet): Promise<Record<string, string>> {
  const port = await guarded(faults);
  const framing = summary(
    await exchange(port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'),
  );
  const idle = summary(await exchange(port, ''));
  const held = await Promise.all(
    Array.from(
      { length: LIMITS.maxConnections },
      () =>
        new Promise<Socket>((resolve) => {
          const s = connect({ host: '127.0.0.1', port }, () => resolve(s));
          s.on('error', () => undefined);
          sockets.push(s);
        }),
    ),
  );
  await new Promise((resolve) => setTimeout(resolve, 50)); // the server saw them all
  const pastCap = summary(await exchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
  for (const s of held) s.destroy();
  return { framing, idle, pastCap };
}

describe('HTTP hygiene (http-guard.ts)', () => {
  it('answers a framing error with an OpenAI body, closes a silent connection, refuses past the cap with a 503 body', async () => {
    expect(await hostileClients(NO_FAULTS)).toEqual({
      framing: '400 bad_framing invalid_request_error',
      idle: 'no status no body', // closed by the server after idleMs, nothing said
      pastCap: '503 overloaded overloaded_error',
    });
  });

  it("negative control: with skip-http-guard Node's empty 400, an idle connection left open, and no cap", async () => {
    expect(await hostileClients(new FaultSet(['skip-http-guard']))).toEqual({
      framing: '400 no body',
      idle: 'still open',
      pastCap: '200 not JSON',
    });
  });
});
