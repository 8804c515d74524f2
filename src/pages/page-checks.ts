// The ownership half of the page checks: may this reader or writer touch this page through
// this tag? A pure function of one ledger entry; PagePool adds the stamp half and throws.
// Must never: consult stamps, throw, or relax a rule for any state (free and quarantined
// pages are nobody's to read or write; cached pages are read-only, for their tenant's readers).
import { assertNever, type PageCheckFailure, type Tag } from '../core/index.js';
import { describeEntry, describeOwner, type Owner, type PageEntry } from './page-entry.js';

export type Access = 'read' | 'write';

export interface CheckFailure {
  readonly failure: PageCheckFailure;
  /** What the checker expected to find, for the error message. */
  readonly expected: string;
  readonly found: string;
}

/**
 * Why `who` may not `access` the page of `entry` through `tag`, or undefined when it may.
 * Checked in the order state, tenant, owner, epoch, so the reported failure is the most
 * telling one (another tenant's page says wrong-tenant even if its epoch also moved on).
 */
export function ownershipFailure(entry: PageEntry, tag: Tag, who: Owner, access: Access): CheckFailure | undefined {
  const expected =
    access === 'write'
      ? `allocated to ${describeOwner(who)} in epoch ${tag.epoch}`
      : `allocated to or cached and referenced by ${describeOwner(who)} in epoch ${tag.epoch}`;
  const fail = (failure: PageCheckFailure): CheckFailure => ({ failure, expected, found: describeEntry(entry) });
  switch (entry.state) {
    case 'free':
    case 'quarantined':
      return fail('not-allocated');
    case 'allocated':
      if (entry.tenant !== who.tenant) return fail('wrong-tenant');
      if (entry.rid !== who.rid) return fail('wrong-owner');
      break;
    case 'cached':
      if (entry.tenant !== who.tenant) return fail('wrong-tenant');
      if (access === 'write') return fail('read-only');
      if (!entry.readers.includes(who.rid)) return fail('wrong-owner');
      break;
    default:
      return assertNever(entry, 'page entry');
  }
  return entry.epoch === tag.epoch ? undefined : fail('wrong-epoch');
}
