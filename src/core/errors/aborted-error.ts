import { TesseraError } from './tessera-error.js';

/** The request was aborted before it finished: client disconnect, operator, or a peer's abort. */
export class AbortedError extends TesseraError {
  override name = 'AbortedError' as const;
  constructor(reason: string) {
    super('aborted', `request aborted: ${reason}`);
  }
}

export const isAbortedError = (e: unknown): e is AbortedError => e instanceof AbortedError;
