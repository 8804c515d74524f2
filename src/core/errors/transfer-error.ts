import { TesseraError } from './tessera-error.js';

/** A KV transfer failed closed: checksum, tag, coverage, digest, sequence or a lost peer. */
export class TransferError extends TesseraError {
  override name = 'TransferError' as const;
  constructor(message: string, cause?: unknown) {
    super('transfer_failed', message, { cause });
  }
}

export const isTransferError = (e: unknown): e is TransferError => e instanceof TransferError;
