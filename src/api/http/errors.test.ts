// The one table: every error code has a 4xx/5xx status, never a 2xx, and the statuses the
// issue names are the ones clients get.
import { describe, expect, it } from 'vitest';
import { InvariantError, TimeoutError } from '../../core/index.js';
import { errorBody, httpStatusOf, problemOf, type ApiErrorCode } from './errors.js';

/** Every code (the Record type makes a missing code a compile error) and its status. */
const EXPECTED = {
  invalid_request: 400,
  context_length_exceeded: 400,
  pool_too_small: 400,
  unauthorized: 401,
  model_not_found: 404,
  route_not_found: 404,
  method_not_allowed: 405,
  body_too_large: 413,
  overloaded: 503,
  rate_limit_exceeded: 429,
  kv_page_check_failed: 500,
  transfer_failed: 502,
  timeout: 504,
  aborted: 503,
  model_load_failed: 500,
  config_invalid: 500,
  internal: 500,
  bad_framing: 400,
  headers_too_large: 431,
  request_timeout: 408,
} as const satisfies Record<ApiErrorCode, number>;

describe('httpStatusOf', () => {
  for (const [code, status] of Object.entries(EXPECTED)) {
    it(`maps ${code} to ${status}`, () => {
      expect(httpStatusOf(code as ApiErrorCode).status).toBe(status);
    });
  }

  it('never maps a failure to a success', () => {
    for (const code of Object.keys(EXPECTED))
      expect(httpStatusOf(code as ApiErrorCode).status).toBeGreaterThanOrEqual(400);
  });
});

describe('problemOf and errorBody', () => {
  it('keeps a TesseraError code and message in the OpenAI shape', () => {
    expect(errorBody(problemOf(new TimeoutError('KvDone', 250)))).toEqual({
      error: {
        message: 'timed out after 250 ms waiting for KvDone',
        type: 'server_error',
        param: null,
        code: 'timeout',
      },
    });
  });

  it('hides anything else behind a generic internal error', () => {
    expect(problemOf(new TypeError('secret detail'))).toEqual({
      code: 'internal',
      message: 'internal error',
      param: null,
    });
    expect(problemOf(new InvariantError('page 3 double-freed')).code).toBe('internal');
  });
});
