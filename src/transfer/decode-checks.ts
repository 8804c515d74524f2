// The checks decode runs on every KvChunk and on KvDone, as pure verdicts.
// Owns: what makes a frame droppable (not ours to write), what fails a transfer closed, and
// the coverage decode computes from its own stamps.
// Must never: write a page, change the ledger, trust a count or coverage a peer claims, or let
// a fault point relax a check that it does not name.
//
// KvChunk, in this order (a frame that fails an earlier check is never looked at further). The
// header checks 1-5 run on the header alone, before a single payload byte lands in a page:
//   1. tag: the frame's (page, epoch) is in rid's page table, and the ledger holds the page for
//      rid in that epoch -> else DROP (a late or replayed frame for a page that changed owner;
//      its payload is read off the wire and discarded, never written)
//   2. slot range inside the page and inside the prompt          -> else FAIL
//   3. seq is the next one expected                               -> else FAIL (gap or repeat)
//   4. KV dtype is decode's own, payload size matches the range    -> else FAIL (the dtype with its own message)
//   5. the range starts where this epoch's stamp ends (in order)  -> else FAIL
// then the payload lands, piece by piece, in those slots, which no stamp covers (decode-landing.ts);
//   6. checksum over the payload matches                          -> else FAIL (nothing stamped)
// and only then are the slots stamped.
// KvDone: chunk count, prompt digest, model fingerprint, transfer digest, claimed coverage, and the coverage of
// decode's own stamps (ledger + stamp epoch + filled slots of every prompt page, by checkRead).
import { isPageCheckError, TransferError, type FaultSet, type Tag } from '../core/index.js';
import { sameTag, type Owner, type PagePool } from '../pages/index.js';
import type { TransferDigest } from './digests.js';
import type { KvChunkHead, KvDone } from './messages.js';

export type ChunkVerdict =
  | {
      readonly kind: 'write';
      /** Index of the page in rid's page table; -1 only when skip-tag-check let a foreign tag through. */ readonly index: number;
    }
  | { readonly kind: 'drop'; readonly why: string }
  | { readonly kind: 'fail'; readonly error: TransferError };

export interface ReceivingRequest {
  readonly owner: Owner;
  readonly tags: readonly Tag[];
  readonly promptTokens: number;
  readonly nextSeq: number;
}

/** Checks 1-5, on a KvChunk's header: whether its payload may land at all. */
export function checkChunkHead(pool: PagePool, r: ReceivingRequest, m: KvChunkHead, faults: FaultSet): ChunkVerdict {
  const pageSize = pool.pageSize;
  let index = r.tags.findIndex((t) => sameTag(t, m.tag));
  if (faults.has('skip-tag-check')) {
    // The negative control: the frame's tag is believed. Even so, nothing is written outside the pool.
    if (!Number.isInteger(m.tag.page) || m.tag.page < 0 || m.tag.page >= pool.ledger.numPages)
      return { kind: 'drop', why: `tag: page ${m.tag.page} is outside the pool` };
  } else {
    if (index < 0)
      return {
        kind: 'drop',
        why: `tag: page ${m.tag.page} epoch ${m.tag.epoch} is not in ${r.owner.rid}'s page table`,
      };
    try {
      pool.checkWrite(r.owner, [m.tag]);
    } catch (error) {
      if (isPageCheckError(error)) return { kind: 'drop', why: `tag: ${error.message}` };
      throw error;
    }
  }
  const fail = (message: string): ChunkVerdict => ({
    kind: 'fail',
    error: new TransferError(`${r.owner.rid}: ${message}`),
  });
  if (m.numSlots < 1 || m.firstSlot + m.numSlots > pageSize)
    return fail(`KvChunk slots [${m.firstSlot}, ${m.firstSlot + m.numSlots}) do not fit a page of ${pageSize}`);
  if (index >= 0 && index * pageSize + m.firstSlot + m.numSlots > r.promptTokens) {
    return fail(
      `KvChunk for page ${index} slots [${m.firstSlot}, ${m.firstSlot + m.numSlots}) lies beyond the prompt's ${r.promptTokens} tokens`,
    );
  }
  if (m.seq !== r.nextSeq) return fail(`KvChunk seq ${m.seq} where ${r.nextSeq} was expected (a gap or a repeat)`);
  if (m.kvDtype !== pool.kv.dtype && !faults.has('skip-kv-dtype-check'))
    return fail(
      `KvChunk carries ${m.kvDtype} KV, but this decode stores ${pool.kv.dtype} (--kv-dtype differs between prefill and decode): the cluster is misconfigured`,
    );
  const numBytes = pool.slotRangeBytes(m.numSlots);
  if (m.payloadBytes !== numBytes)
    return fail(`KvChunk of ${m.numSlots} slots carries ${m.payloadBytes} bytes, not ${numBytes}`);
  if (index >= 0) {
    const stamp = pool.stampOf(m.tag.page);
    const filled = stamp.epoch === m.tag.epoch ? stamp.filledSlots : 0;
    if (m.firstSlot !== filled)
      return fail(`KvChunk for page ${index} starts at slot ${m.firstSlot}, but slots [0, ${filled}) are written`);
  }
  return { kind: 'write', index };
}

/**
 * Check 6, once the whole payload has landed: undefined when `actual` (the checksum of what
 * arrived; undefined when skip-checksum did not compute one) is what the header says.
 */
export function checkChecksum(
  r: ReceivingRequest,
  m: KvChunkHead,
  actual: string | undefined,
): TransferError | undefined {
  if (actual === undefined || actual === m.checksum) return undefined;
  return new TransferError(
    `${r.owner.rid}: KvChunk seq ${m.seq} checksum mismatch: frame says ${m.checksum}, payload hashes to ${actual}`,
  );
}

export interface DoneRequest extends ReceivingRequest {
  readonly promptDigest: string;
  readonly digest: TransferDigest;
  readonly adapter?: string;
}

/** undefined when decode may start; else why the transfer fails closed. */
export function checkDone(
  host: { readonly pool: PagePool; readonly model: string },
  r: DoneRequest,
  m: KvDone,
  faults: FaultSet,
): { readonly error: TransferError; readonly checksum: boolean } | undefined {
  const { pool } = host;
  const fail = (message: string, checksum = false) => ({
    error: new TransferError(`${r.owner.rid}: ${message}`),
    checksum,
  });
  if (m.numChunks !== r.nextSeq) return fail(`KvDone says ${m.numChunks} chunks were sent, ${r.nextSeq} arrived`);
  if (m.promptDigest !== r.promptDigest)
    return fail(`KvDone's prompt digest ${m.promptDigest} is not the router's ${r.promptDigest}`);
  if (m.model !== host.model && !faults.has('skip-model-check')) {
    return fail(
      `KvDone comes from a prefill serving another model (fingerprint ${m.model}; this decode serves ${host.model}): the cluster is misconfigured`,
    );
  }
  // The adapter is part of the model the KV was computed with: the same check, the same control.
  if ((m.adapter ?? 'none') !== (r.adapter ?? 'none') && !faults.has('skip-model-check')) {
    return fail(
      `KvDone's KV was computed under LoRA adapter ${m.adapter ?? 'none'}; this request decodes under ${r.adapter ?? 'none'}: the cluster is misconfigured`,
    );
  }
  const digest = r.digest.hex();
  if (m.digest !== digest)
    return fail(`transfer digest mismatch: KvDone says ${m.digest}, the chunks received give ${digest}`, true);
  if (m.tokensCovered !== r.promptTokens)
    return fail(`KvDone claims ${m.tokensCovered} tokens covered, the prompt has ${r.promptTokens}`);
  if (faults.has('skip-page-check')) return undefined; // the negative control: trust the sender's claim
  const covered = stampCoverage(pool, r.tags, r.promptTokens);
  if (covered < r.promptTokens)
    return fail(
      `decode's stamps cover ${covered} of the prompt's ${r.promptTokens} tokens (the sender claimed ${m.tokensCovered})`,
    );
  try {
    pool.checkRead(r.owner, r.tags, r.promptTokens);
  } catch (error) {
    if (isPageCheckError(error)) return fail(`page check before decoding: ${error.message}`);
    throw error;
  }
  return undefined;
}

/** Leading prompt positions whose pages carry a stamp of the page table's epoch covering them. */
export function stampCoverage(pool: PagePool, tags: readonly Tag[], promptTokens: number): number {
  let covered = 0;
  for (const tag of tags) {
    const want = Math.min(pool.pageSize, promptTokens - covered);
    if (want <= 0) break;
    const stamp = pool.stampOf(tag.page);
    const filled = stamp.epoch === tag.epoch ? Math.min(stamp.filledSlots, want) : 0;
    covered += filled;
    if (filled < want) break;
  }
  return covered;
}

/** Only for frames skip-tag-check let through: whether the pool would accept this stamp at all. */
export function mayStamp(pool: PagePool, tag: Tag, filledSlots: number): boolean {
  const e = pool.ledger.entry(tag.page);
  const stamp = pool.stampOf(tag.page);
  return (
    e.state === 'allocated' &&
    e.epoch === tag.epoch &&
    filledSlots >= (stamp.epoch === tag.epoch ? stamp.filledSlots : 0)
  );
}
