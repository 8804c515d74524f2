import { TesseraError } from './tessera-error.js';

/** A broken invariant inside Tessera: always a bug, never the user's fault. */
export class InvariantError extends TesseraError {
  override name = 'InvariantError' as const;
  constructor(message: string, cause?: unknown) {
    super('internal', message, { cause });
  }
}

export const isInvariantError = (e: unknown): e is InvariantError => e instanceof InvariantError;
