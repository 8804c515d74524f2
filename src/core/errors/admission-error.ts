import { TesseraError } from './tessera-error.js';

/**
 * A request refused at admission, before any page is allocated: it exceeds the context
 * length, or it could never fit some node's pool. Always the request's fault, never transient.
 */
export class AdmissionError extends TesseraError {
  override name = 'AdmissionError' as const;
  constructor(code: 'context_length_exceeded' | 'pool_too_small', message: string, param?: string) {
    super(code, message, { param });
  }
}

export const isAdmissionError = (e: unknown): e is AdmissionError => e instanceof AdmissionError;
