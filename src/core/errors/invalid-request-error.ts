import { TesseraError } from './tessera-error.js';

/** The client's request is malformed or asks for something unsupported. */
export class InvalidRequestError extends TesseraError {
  override name = 'InvalidRequestError' as const;
  constructor(message: string, param?: string, cause?: unknown) {
    super('invalid_request', message, { param, cause });
  }
}

export const isInvalidRequestError = (e: unknown): e is InvalidRequestError => e instanceof InvalidRequestError;
