// The one table from error codes to HTTP statuses, and the OpenAI error body. Every failed
// request's status comes from here; nothing else in Tessera picks an HTTP status.
// Must never map a failure to a 2xx (a test walks the whole table).
import { assertNever, isTesseraError, TesseraError, type ErrorCode } from '../../core/index.js';

/** Tessera's error codes, plus the few only HTTP can produce. */
export type ApiErrorCode =
  ErrorCode | 'route_not_found' | 'method_not_allowed' | 'body_too_large' | 'rate_limit_exceeded' | HttpFramingCode;

/** Node's HTTP parser refused the request's framing (http-guard.ts answers them). */
export type HttpFramingCode = 'bad_framing' | 'headers_too_large' | 'request_timeout';

export interface HttpStatus {
  readonly status: number;
  /** OpenAI's `error.type`. */
  readonly type: string;
}

const BAD_REQUEST: HttpStatus = { status: 400, type: 'invalid_request_error' };
const SERVER_ERROR: HttpStatus = { status: 500, type: 'server_error' };

/** The table. An exhaustive switch: adding an ErrorCode without a status does not compile. */
export function httpStatusOf(code: ApiErrorCode): HttpStatus {
  switch (code) {
    case 'invalid_request':
    case 'context_length_exceeded':
    case 'pool_too_small':
      return BAD_REQUEST;
    // OpenAI's own 401: {type: invalid_request_error, code: invalid_api_key} (errorBody names the code).
    case 'unauthorized':
      return { status: 401, type: 'invalid_request_error' };
    case 'model_not_found':
    case 'route_not_found':
      return { status: 404, type: 'not_found_error' };
    case 'method_not_allowed':
      return { status: 405, type: 'invalid_request_error' };
    case 'body_too_large':
      return { status: 413, type: 'invalid_request_error' };
    case 'bad_framing':
      return BAD_REQUEST;
    case 'headers_too_large':
      return { status: 431, type: 'invalid_request_error' };
    case 'request_timeout':
      return { status: 408, type: 'invalid_request_error' };
    case 'overloaded':
      return { status: 503, type: 'overloaded_error' };
    // A key's own limit (rate-limit.ts), not the service's load: OpenAI's 429, with Retry-After.
    case 'rate_limit_exceeded':
      return { status: 429, type: 'rate_limit_error' };
    // Aborted by someone other than the client (a peer, shutdown): the service failed it.
    case 'aborted':
      return { status: 503, type: 'server_error' };
    // A peer worker's KV data failed its checks: the router is a gateway to that worker.
    case 'transfer_failed':
      return { status: 502, type: 'server_error' };
    case 'timeout':
      return { status: 504, type: 'server_error' };
    case 'kv_page_check_failed':
    case 'model_load_failed':
    case 'config_invalid':
    case 'internal':
      return SERVER_ERROR;
    default:
      return assertNever(code, 'error code');
  }
}

/** What one failed request answers, before it becomes JSON. */
export interface Problem {
  readonly code: ApiErrorCode;
  readonly message: string;
  readonly param: string | null;
  /** Sent as the Retry-After header (whole seconds): when a rate limit will let the request in. */
  readonly retryAfterSeconds?: number;
}

export function problem(code: ApiErrorCode, message: string, param: string | null = null): Problem {
  return { code, message, param };
}

/**
 * A key's limit refused a request inside the back end's call (rate-limit.ts): a TesseraError (so
 * it ends the request as an expected failure, not a bug) that problemOf turns into a 429.
 */
export class RateLimitError extends TesseraError {
  override name = 'RateLimitError';
  readonly retryAfterSeconds: number;

  constructor(message: string, retryAfterSeconds: number) {
    super('overloaded', message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/**
 * Any thrown or reported error as a Problem. Only TesseraErrors keep their code and message;
 * anything else is a bug and becomes `internal` with a generic message (no stack to clients).
 */
export function problemOf(error: unknown): Problem {
  if (isTesseraError(error)) return fromTesseraError(error);
  return problem('internal', 'internal error');
}

function fromTesseraError(error: TesseraError): Problem {
  if (error instanceof RateLimitError) {
    return { ...problem('rate_limit_exceeded', error.message), retryAfterSeconds: error.retryAfterSeconds };
  }
  return problem(error.code, error.message, error.param ?? null);
}

export interface ErrorBody {
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string;
  };
}

/** OpenAI's nested shape: `{"error":{"message","type","param","code"}}`. */
export function errorBody(p: Problem): ErrorBody {
  return {
    error: {
      message: p.message,
      type: httpStatusOf(p.code).type,
      param: p.param,
      code: p.code === 'unauthorized' ? 'invalid_api_key' : p.code,
    },
  };
}
