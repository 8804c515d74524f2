// HTTP hygiene for the node:http listener: idle, header and request timeouts, a cap on open
// connections with a clear refusal, and OpenAI-shaped bodies for what Node's parser refuses
// (bad Content-Length, Content-Length with chunked, bad header lines, oversized headers), which
// Node would otherwise answer with an empty 400/431.
// Owns: which sockets count, when an idle one is closed, the raw answers written before a
// request exists. Statuses come from errors.ts, as everywhere in src/api.
// Must never: cut a socket that is answering a request (a stream waiting for its first token
// is silent, not idle), or write raw bytes into a response that has begun.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { NO_FAULTS, type FaultSet } from '../core/index.js';
import { errorBody, httpStatusOf, problem, type Problem } from './errors.js';

export interface HttpLimits {
  /** A connection with no request in progress for this long is closed. */
  readonly idleMs: number;
  /** Node's headersTimeout: the whole header block within this time of the request's start. */
  readonly headersMs: number;
  /** Node's requestTimeout: the whole request (headers and body) within this time. */
  readonly requestMs: number;
  /** Open connections at most; one more is answered 503 and closed. */
  readonly maxConnections: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  idleMs: 30_000,
  headersMs: 20_000,
  requestMs: 120_000,
  maxConnections: 900,
};

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
 * `skip-http-guard` (test-only) applies nothing: Node's defaults, as before this guard.
 */
export function guardHttpServer(
  server: Server,
  limits: HttpLimits,
  faults: FaultSet = NO_FAULTS,
): { readonly openConnections: () => number } {
  if (faults.has('skip-http-guard')) return { openConnections: () => 0 };
  server.headersTimeout = limits.headersMs;
  server.requestTimeout = limits.requestMs;
  const open = new Set<Socket>();
  /** Sockets with a request being read or answered. */
  const busy = new Map<Socket, number>();

  // A listener here tells Node not to destroy a socket on its timeout itself: the one below
  // decides, sparing sockets that are answering a request.
  server.on('timeout', () => undefined);
  server.on('connection', (socket: Socket) => {
    if (open.size >= limits.maxConnections) {
      const p = problem('overloaded', `The server has ${open.size} open connections, its limit; try again later.`);
      socket.end(rawProblemResponse(p));
      socket.destroySoon();
      return;
    }
    open.add(socket);
    socket.once('close', () => {
      open.delete(socket);
      busy.delete(socket);
    });
    socket.setTimeout(limits.idleMs);
    socket.on('timeout', () => {
      if ((busy.get(socket) ?? 0) === 0) socket.destroy();
    });
  });

  server.on('request', (req, res) => {
    const socket = req.socket;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const left = (busy.get(socket) ?? 1) - 1;
      if (left > 0) busy.set(socket, left);
      else busy.delete(socket);
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

  return { openConnections: () => open.size };
}
