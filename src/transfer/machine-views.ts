// The machines' read-only views for the operator (the dashboard's page map): the transfers and
// pairs in flight, the quarantined pages and why, live attempts by state. Each is a function of
// a machine's live records, called by the machine's own `inFlight()`.
// Must never: change a record, or decide anything (the machines do; this only reads).
import type { PairView, QuarantineView, TenantId, TransferView } from '../core/index.js';
import type { Active as DecodeRecord } from './decode-types.js';

/** What prefill keeps of a live request, as far as its view reads it. */
interface PrefillRecord {
  readonly rid: TransferView['rid'];
  readonly owner: { readonly tenant: TenantId };
  readonly state: string;
  readonly decode: string;
  readonly dstTags: readonly unknown[];
  readonly numTokens: number;
  readonly sentBytes: number;
}

/** What the router keeps of a live attempt, as far as its views read it. */
interface AttemptRecord {
  readonly rid: PairView['rid'];
  readonly client: { readonly request: { readonly tenant: TenantId } };
  readonly state: string;
  readonly pair: { readonly prefill: string; readonly decode: string };
  readonly tokensForwarded: number;
}

/** The transfers in flight from a prefill node. */
export function prefillTransfers(records: Iterable<PrefillRecord>): TransferView[] {
  return [...records].map((r) => ({
    rid: r.rid,
    tenant: r.owner.tenant,
    phase: r.state,
    peer: r.decode,
    numPages: r.dstTags.length,
    numTokens: r.numTokens,
    bytes: r.sentBytes,
  }));
}

/** The transfers being received on a decode node, and the quarantined pages with why. */
export function decodeTransfers(records: Iterable<DecodeRecord>): {
  readonly transfers: TransferView[];
  readonly quarantined: QuarantineView[];
} {
  const transfers: TransferView[] = [];
  const quarantined: QuarantineView[] = [];
  for (const r of records) {
    if (r.state === 'Decoding') continue;
    const base = { rid: r.rid, tenant: r.owner.tenant, numPages: r.tags.length };
    transfers.push({ ...base, phase: r.state, peer: r.writer, numTokens: r.promptTokens, bytes: r.bytes });
    if (r.pages === 'quarantined') quarantined.push({ ...base, reason: r.abortWhy ?? 'aborted', waitingFor: r.writer });
  }
  return { transfers, quarantined };
}

/** The router's attempts in flight and their pairs. */
export function routerPairs(attempts: Iterable<AttemptRecord>): PairView[] {
  return [...attempts].map((a) => ({
    rid: a.rid,
    tenant: a.client.request.tenant,
    phase: a.state,
    prefill: a.pair.prefill,
    decode: a.pair.decode,
    tokensForwarded: a.tokensForwarded,
  }));
}

/** Live attempts (or requests) by state. */
export function countStates(records: Iterable<{ readonly state: string }>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of records) counts[r.state] = (counts[r.state] ?? 0) + 1;
  return counts;
}
