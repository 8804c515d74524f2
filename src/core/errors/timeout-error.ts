import { TesseraError } from './tessera-error.js';

/** A wait ran past its limit. Every wait in Tessera has one, and ends the request with this. */
export class TimeoutError extends TesseraError {
  override name = 'TimeoutError' as const;
  readonly waitedFor: string;
  readonly timeoutMs: number;
  constructor(waitedFor: string, timeoutMs: number) {
    super('timeout', `timed out after ${timeoutMs} ms waiting for ${waitedFor}`);
    this.waitedFor = waitedFor;
    this.timeoutMs = timeoutMs;
  }
}

export const isTimeoutError = (e: unknown): e is TimeoutError => e instanceof TimeoutError;
