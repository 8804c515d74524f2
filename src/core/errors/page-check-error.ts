import type { PageId } from '../ids.js';
import { TesseraError } from './tessera-error.js';

export type PageCheckFailure =
  /** The page is free or quarantined: nobody may read or write it. */
  | 'not-allocated'
  /** The page is cached (shared, read-only) and someone tried to write it. */
  | 'read-only'
  | 'wrong-owner'
  | 'wrong-tenant'
  | 'wrong-epoch'
  | 'stamp-epoch'
  | 'stamp-coverage';

/**
 * A reader was about to touch a page it does not own, in an epoch not its own, or whose data
 * was never written for it. The read did not happen; the request ends with this error.
 */
export class PageCheckError extends TesseraError {
  override name = 'PageCheckError' as const;
  readonly page: PageId;
  readonly failure: PageCheckFailure;
  constructor(page: PageId, failure: PageCheckFailure, message: string) {
    super('kv_page_check_failed', message);
    this.page = page;
    this.failure = failure;
  }
}

export const isPageCheckError = (e: unknown): e is PageCheckError => e instanceof PageCheckError;
