// The one base class of every error Tessera raises on purpose. It carries a stable `code`;
// only src/api turns codes into HTTP statuses, and only src/cli turns them into exit codes.

export type ErrorCode =
  /** The client sent something malformed or unsupported. */
  | 'invalid_request'
  /** prompt tokens + max_tokens exceed the context length. */
  | 'context_length_exceeded'
  /** The request could never fit the KV pool of some node on its path. */
  | 'pool_too_small'
  | 'unauthorized'
  | 'model_not_found'
  /** Too many requests waiting; try again later. */
  | 'overloaded'
  /** A page's ledger owner/epoch or stamp did not match what a reader expected. */
  | 'kv_page_check_failed'
  /** A KV transfer failed: bad checksum, tag mismatch, short coverage, lost peer. */
  | 'transfer_failed'
  | 'timeout'
  /** The request was aborted (client disconnect, operator, peer). */
  | 'aborted'
  /** A model file is missing, truncated or inconsistent. */
  | 'model_load_failed'
  /** Bad flags or configuration, e.g. a context length the pool cannot hold. */
  | 'config_invalid'
  /** A broken invariant: a bug. */
  | 'internal';

export interface TesseraErrorOptions {
  cause?: unknown;
  /** The request field at fault, for client errors (OpenAI's `param`). */
  param?: string;
}

export class TesseraError extends Error {
  override name = 'TesseraError';
  readonly code: ErrorCode;
  readonly param: string | undefined;

  constructor(code: ErrorCode, message: string, options: TesseraErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.param = options.param;
  }
}

export function isTesseraError(error: unknown): error is TesseraError {
  return error instanceof TesseraError;
}
