// HTTP hygiene for the node:http listener: a deadline for every request head (counted from the
// connection's opening, whether or not a byte arrived), an idle bound between requests, a cap on
// open connections that closes the longest-waiting idle ones to make room before it refuses
// anyone, a cap on idle connections per source address, and OpenAI-shaped bodies for what
// Node's parser refuses (bad Content-Length, Content-Length with chunked, bad header lines,
// oversized headers), which Node would otherwise answer with an empty 400/431.
// Owns: which sockets count, when a waiting one is closed, the raw answers written before a
// request exists. The bookkeeping is http-connections.ts; statuses come from errors.ts.
// Must never: cut a socket that is answering a request (a stream waiting for its first token
// is silent, not idle), or write raw bytes into a response that has begun.
//
// Why not Node's own timeouts: headersTimeout starts at a request's first byte (a socket that
// never sends one is not timed out by it) and is checked only every connectionsCheckingInterval
// (30 s); a socket timeout restarts with every byte (a header line every 5 s holds it), and
// Node's keep-alive timer (5 s) cut idle connections long before idleMs. One sweep here instead.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { NO_FAULTS, type FaultSet } from '../../core/index.js';
import { errorBody, httpStatusOf, problem, type Problem } from './errors.js';
import { ConnectionTable, type ExpiryReason } from './http-connections.js';

export interface HttpLimits {
  /** A connection with no request in progress and no byte of a next one for this long is closed. */
  readonly idleMs: number;
  /** A request head complete within this of the connection opening (or of its first byte after a response). */
  readonly headersMs: number;
  /** Node's requestTimeout: the whole request (headers and body) within this time. */
  readonly requestMs: number;
  /**
   * Open connections at most. At the cap the one that has waited longest without a request is
   * closed to make room; only when every one has a request in progress is a newcomer answered 503.
   */
  readonly maxConnections: number;
  /** Connections without a request in progress from one source address; past it, that source's oldest is closed. */
  readonly maxIdlePerSource: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  idleMs: 30_000,
  headersMs: 20_000,
  requestMs: 120_000,
  maxConnections: 900,
  maxIdlePerSource: 256,
};

/** How often the deadlines are checked: a quarter of the shorter bound, within [50 ms, 1 s]. */
function sweepIntervalMs(limits: HttpLimits): number {
  return Math.min(1000, Math.max(50, Math.floor(Math.min(limits.idleMs, limits.headersMs) / 4)));
}

const REASONS: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
  503: 'Service Unavailable',
};

/** Node's parser error codes -> ours. */
function framingProblem(code: string | undefined): Problem {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return problem('headers_too_large', 'The request headers are too large.');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return problem('request_timeout', 'The request did not arrive in time.');
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return problem('bad_framing', 'The request has both Content-Length and Transfer-Encoding: chunked.');
    case 'HPE_INVALID_CONTENT_LENGTH':
      return problem('bad_framing', 'The request has an invalid Content-Length.');
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return problem('bad_framing', 'The request has an invalid Transfer-Encoding.');
    default:
      return problem('bad_framing', `The request is not valid HTTP/1.1 (${(code ?? 'unparseable').slice(0, 40)}).`);
  }
}

/** One whole HTTP response with an OpenAI error body, for a socket that has no request object. */
export function rawProblemResponse(p: Problem): string {
  const { status } = httpStatusOf(p.code);
  const body = JSON.stringify(errorBody(p));
  return `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

/**
 * Applies `limits` to `server`. Returns the number of open connections, for tests and health.
 * Test-only fault points: `skip-http-guard` applies nothing (Node's defaults, as before this
 * guard); `lax-header-deadline` leaves request heads to Node's headersTimeout (a silent socket
 * waits out idleMs, a trickle is never cut); `refuse-at-http-cap` refuses newcomers at the cap
 * instead of closing idle connections to make room, and has no per-source cap.
 */
export function guardHttpServer(
  server: Server,
  limits: HttpLimits,
  faults: FaultSet = NO_FAULTS,
  nowMs: () => number = () => performance.now(),
): { readonly openConnections: () => number } {
  if (faults.has('skip-http-guard')) return { openConnections: () => 0 };
  const laxHeads = faults.has('lax-header-deadline');
  const refuseAtCap = faults.has('refuse-at-http-cap');
  server.headersTimeout = limits.headersMs;
  server.requestTimeout = limits.requestMs;
  // Node's keep-alive timer (5 s by default) would cut idle connections before idleMs; this
  // value is also what the Keep-Alive header tells clients. The sweep below does the closing.
  server.keepAliveTimeout = limits.idleMs;
  const table = new ConnectionTable<Socket>(limits);

  /** Out of the table now (its count drops before the socket's 'close'), then closed. */
  const close = (socket: Socket, why: ExpiryReason | 'evicted'): void => {
    table.closed(socket);
    if (why === 'headers' && socket.bytesRead > 0 && socket.writable) {
      socket.end(rawProblemResponse(problem('request_timeout', 'The request headers did not arrive in time.')));
      socket.destroySoon();
    } else socket.destroy();
  };
  const sweep = (): void => {
    for (const { c, why } of table.expired(nowMs(), (socket) => socket.bytesRead))
      if (!laxHeads || why === 'idle') close(c, why);
  };
  let timer: NodeJS.Timeout | undefined;
  server.on('listening', () => {
    clearInterval(timer);
    timer = setInterval(sweep, sweepIntervalMs(limits)).unref();
  });
  server.on('close', () => clearInterval(timer));

  // A listener here tells Node not to destroy a socket on its own timeouts: the sweep decides.
  server.on('timeout', () => undefined);
  server.on('connection', (socket: Socket) => {
    const source = socket.remoteAddress ?? 'unknown';
    if (!refuseAtCap) {
      // Room first from the longest-waiting idle connections, this source's own past its cap.
      if (table.waitingFrom(source) >= limits.maxIdlePerSource) {
        const own = table.oldestWaiting(source);
        if (own !== undefined) close(own, 'evicted');
      }
      while (table.size >= limits.maxConnections) {
        const oldest = table.oldestWaiting();
        if (oldest === undefined) break;
        close(oldest, 'evicted');
      }
    }
    if (table.size >= limits.maxConnections) {
      const p = problem('overloaded', `The server has ${table.size} open connections, its limit; try again later.`);
      socket.end(rawProblemResponse(p));
      socket.destroySoon();
      return;
    }
    table.opened(socket, source, nowMs());
    socket.once('close', () => table.closed(socket));
  });

  server.on('request', (req, res) => {
    const socket = req.socket;
    table.requestStarted(socket);
    res.once('close', () => {
      table.requestEnded(socket, nowMs(), socket.bytesRead);
      // Idle again: past its source's cap, that source's longest-idle connection goes.
      const source = socket.remoteAddress ?? 'unknown';
      if (refuseAtCap || table.waitingFrom(source) <= limits.maxIdlePerSource) return;
      const own = table.oldestWaiting(source);
      if (own !== undefined) close(own, 'evicted');
    });
  });

  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    const inResponse =
      (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (error.code === 'ECONNRESET' || !socket.writable || inResponse) {
      socket.destroy();
      return;
    }
    socket.end(rawProblemResponse(framingProblem(error.code)));
  });

  return { openConnections: () => table.size };
}
