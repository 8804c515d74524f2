// What every response carries before any route runs: `x-request-id` (the client's, echoed when
// it is a sane token, else a fresh one), and with --cors-origin the CORS headers, a preflight
// (OPTIONS) answered 204 here. Must never answer anything but a preflight.
import type { IncomingMessage, ServerResponse } from 'node:http';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** True when the request was answered here (a CORS preflight). */
export function answerHttpExtras(
  req: IncomingMessage,
  res: ServerResponse,
  corsOrigin: string | undefined,
  freshId: () => string,
): boolean {
  const given = req.headers['x-request-id'];
  res.setHeader('x-request-id', typeof given === 'string' && REQUEST_ID.test(given) ? given : `req-${freshId()}`);
  if (corsOrigin === undefined) return false;
  res.setHeader('access-control-allow-origin', corsOrigin);
  if (corsOrigin !== '*') res.setHeader('vary', 'Origin');
  res.setHeader('access-control-expose-headers', 'x-request-id');
  if (req.method !== 'OPTIONS') return false;
  res.writeHead(204, {
    'access-control-allow-methods': 'GET, POST, OPTIONS',
    'access-control-allow-headers': req.headers['access-control-request-headers'] ?? 'authorization, content-type',
    'access-control-max-age': '600',
    'content-length': '0',
  });
  res.end();
  return true;
}
