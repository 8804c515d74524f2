// Bytes in and out of node:http: the size-limited body reader, strict UTF-8 + JSON parsing,
// and JSON/error responses. Must never buffer more than the body limit, and never answer a
// failure with a 2xx (statuses come from errors.ts only).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody, httpStatusOf, problem, type Problem } from './errors.js';

export type BodyResult =
  | { readonly kind: 'ok'; readonly bytes: Buffer }
  | { readonly kind: 'too-large' }
  /** The client went away (or the socket failed) before the body ended. */
  | { readonly kind: 'closed' };

/** Read the whole body, refusing (without buffering) anything past `maxBytes`. */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > maxBytes) return Promise.resolve({ kind: 'too-large' });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let numBytes = 0;
    let settled = false;
    const settle = (result: BodyResult): void => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onClosed);
      req.off('close', onClosed);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      numBytes += chunk.length;
      if (numBytes > maxBytes) settle({ kind: 'too-large' });
      else chunks.push(chunk);
    };
    const onEnd = (): void => settle({ kind: 'ok', bytes: Buffer.concat(chunks, numBytes) });
    const onClosed = (): void => settle({ kind: 'closed' });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onClosed);
    req.on('close', onClosed);
  });
}

export type JsonResult =
  { readonly kind: 'ok'; readonly value: unknown } | { readonly kind: 'bad'; readonly problem: Problem };

/** Strict UTF-8 (invalid bytes are a 400, not U+FFFD), then JSON. */
export function parseJson(bytes: Uint8Array): JsonResult {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { kind: 'bad', problem: problem('invalid_request', 'The request body is not valid UTF-8.') };
  }
  if (text.trim() === '')
    return { kind: 'bad', problem: problem('invalid_request', 'The request body is empty; expected a JSON object.') };
  try {
    return { kind: 'ok', value: JSON.parse(text) as unknown };
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { kind: 'bad', problem: problem('invalid_request', `The request body is not valid JSON: ${why}`) };
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

export function sendProblem(res: ServerResponse, p: Problem, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    // Too late for a status: the caller should have used the SSE error event. Cut the
    // connection so the client sees a failure rather than a truncated success.
    res.destroy();
    return;
  }
  const retry: Record<string, string> =
    p.retryAfterSeconds === undefined ? {} : { 'retry-after': String(p.retryAfterSeconds) };
  sendJson(res, httpStatusOf(p.code).status, errorBody(p), { ...retry, ...headers });
}

/**
 * Answer 413 without reading the rest of an oversize body into memory. The connection closes
 * after the answer; the remaining bytes are read and dropped so the client sees the answer
 * rather than a reset, for at most `graceMs`.
 */
export function refuseOversizeBody(req: IncomingMessage, res: ServerResponse, maxBytes: number, graceMs: number): void {
  sendProblem(res, problem('body_too_large', `The request body exceeds the limit of ${maxBytes} bytes.`), {
    connection: 'close',
  });
  req.on('data', () => undefined);
  req.resume();
  const timer = setTimeout(() => req.socket.destroy(), graceMs);
  timer.unref();
  req.socket.once('close', () => clearTimeout(timer));
}
