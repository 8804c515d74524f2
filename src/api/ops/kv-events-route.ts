// GET /kv-events: a node's KV events (pages/kv-events.ts' KvEventRing) for an external router's
// index (llm-d's KV-cache indexer, Dynamo's KV router), in vLLM's KVEventBatch shape where it costs
// nothing, as JSON:
//   GET /kv-events?after=SEQ[&max=N]     one batch: the events after SEQ (0: from the oldest held)
//   GET /kv-events/stream[?after=SEQ]    Server-Sent Events: one `event: kv` batch per write, its
//                                        `id:` the batch's last seq (Last-Event-ID resumes), a
//                                        comment every 15 s while idle
//   batch = {node, block_size, ts, reset, next, events: [
//     {event_id, type: 'BlockStored', block_hashes: [h], parent_block_hash, token_ids: [], block_size, lora_id, medium, tenant},
//     {event_id, type: 'BlockRemoved', block_hashes: [h], medium, tenant},
//     {type: 'AllBlocksCleared'} first when reset]}
// Hashes and tenant tags are the keyed ones (prefix-hash.ts); `token_ids` is always empty (vLLM's
// field, kept so its decoders parse the batch); `lora_id` names the LoRA adapter the block's KV was
// computed under (null: the base model). A reader whose cursor fell out of the ring (a slow
// one) or comes from another run of the node gets `reset: true` and an AllBlocksCleared first.
// A stream reader is sent only what its socket takes: it never holds more than one batch here;
// falling behind the ring resets it. Off (404) without keys; the keys are the admin key and, on a
// PD worker, the cluster secret; anything else (no key, a tenant's API key) is 401.
// Must never: answer a reader without one of those keys (only the test fault `open-kv-events`),
// carry a token id or a tenant's name, or buffer without bound for a slow reader.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FaultSet } from '../../core/index.js';
import { KvEventRing, PrefixHasher, type KvEventRead, type KvEventRecord } from '../../pages/index.js';
import { problem } from '../http/errors.js';
import { sendJson, sendProblem } from '../http/http-io.js';

/** What a server publishes at /kv-events (from src/cli). */
export interface KvEventsAccess {
  readonly ring: KvEventRing;
  /** Keys that may read (admin key, cluster secret); empty: the route is off (404). */
  readonly keys: readonly string[];
  /** The node's name in batches (its cluster address, or "colocated"). */
  readonly node: string;
  readonly blockSize: number;
  /** The LoRA adapter's name for a digest (the node's adapter registry): BlockStored's `lora_id`. */
  readonly adapterName?: (digest: string) => string | undefined;
}

export interface KvEventsContext {
  readonly kvEvents: KvEventsAccess | null;
  readonly faults: FaultSet;
  readonly shutdown: AbortSignal;
}

/**
 * A node's ring and its access (src/cli): hashes keyed with `hashKey` (a PD worker's cluster secret,
 * as its /health report and the router's index are; serve's admin key), readable with `readKeys`.
 * No read key: null (the route is off; the prefix cache publishes nothing).
 */
export function kvEventsFor(o: {
  readonly hashKey: string | null;
  readonly readKeys: readonly (string | null)[];
  readonly node: string;
  readonly blockSize: number;
  readonly faults: FaultSet;
}): KvEventsAccess | null {
  const keys = o.readKeys.filter((key): key is string => key !== null && key !== '');
  if (o.hashKey === null || keys.length === 0) return null;
  const ring = new KvEventRing(new PrefixHasher(o.hashKey, o.faults.has('unkeyed-prefix-hashes')));
  return { ring, keys, node: o.node, blockSize: o.blockSize };
}

/** Events per batch, at most (a JSON poll's `max`, a stream's write). */
export const KV_EVENTS_MAX_BATCH = 512;
const KEEPALIVE_MS = 15_000;
/** vLLM's medium for the engine's own KV pool (the tier a request reads from). */
const MEDIUM = 'GPU';

/** One event as it leaves the node. */
export function wireEvent(
  record: KvEventRecord,
  blockSize: number,
  adapterName?: (digest: string) => string | undefined,
): Record<string, unknown> {
  const { event } = record;
  const base = { event_id: record.seq, type: event.type, block_hashes: [event.blockHash] };
  return event.type === 'BlockStored'
    ? {
        ...base,
        parent_block_hash: event.parentHash,
        token_ids: [],
        block_size: blockSize,
        // vLLM's field: the adapter the block was computed under, by name (its digest when no name is known); null: base.
        lora_id: event.adapterDigest === null ? null : (adapterName?.(event.adapterDigest) ?? event.adapterDigest),
        medium: MEDIUM,
        tenant: event.tenant,
      }
    : { ...base, medium: MEDIUM, tenant: event.tenant };
}

/** One read as a batch. */
export function wireBatch(read: KvEventRead, access: KvEventsAccess, nowMs: number): Record<string, unknown> {
  const events = read.records.map((r) => wireEvent(r, access.blockSize, access.adapterName));
  return {
    node: access.node,
    block_size: access.blockSize,
    ts: nowMs / 1000,
    reset: read.reset,
    next: read.next,
    events: read.reset ? [{ type: 'AllBlocksCleared' }, ...events] : events,
  };
}

export async function handleKvEvents(req: IncomingMessage, res: ServerResponse, ctx: KvEventsContext): Promise<void> {
  const access = admitted(req, res, ctx);
  if (access === null) return;
  const query = new URL(req.url ?? '/', 'http://kv').searchParams;
  const after = cursor(query.get('after'));
  const max = cursor(query.get('max'));
  if (after === null || max === null) {
    sendProblem(res, problem('invalid_request', '`after` and `max` must be whole numbers (0 or more).', 'after'));
    return;
  }
  const read = access.ring.read(after, Math.min(max === 0 ? KV_EVENTS_MAX_BATCH : max, KV_EVENTS_MAX_BATCH));
  sendJson(res, 200, wireBatch(read, access, Date.now()), { 'cache-control': 'no-store' });
}

export async function handleKvEventStream(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: KvEventsContext,
): Promise<void> {
  const access = admitted(req, res, ctx);
  if (access === null) return;
  const lastId = req.headers['last-event-id'];
  const after = cursor(
    typeof lastId === 'string' ? lastId : new URL(req.url ?? '/', 'http://kv').searchParams.get('after'),
  );
  if (after === null) {
    sendProblem(res, problem('invalid_request', '`after` (or Last-Event-ID) must be a whole number.', 'after'));
    return;
  }
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();
  await streamFrom(after, res, access, ctx.shutdown);
}

/** Writes batches as the ring fills and the socket drains, until the reader or the server goes. */
async function streamFrom(
  after: number,
  res: ServerResponse,
  access: KvEventsAccess,
  shutdown: AbortSignal,
): Promise<void> {
  let wake: () => void = () => undefined;
  let pending = true;
  const notify = (): void => {
    pending = true;
    wake();
  };
  const unsubscribe = access.ring.subscribe(notify);
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
  keepalive.unref();
  const gone = (): boolean => res.destroyed || res.writableEnded || shutdown.aborted;
  res.on('close', notify);
  res.on('drain', notify);
  shutdown.addEventListener('abort', notify, { once: true });
  try {
    let cursorAt = after;
    while (!gone()) {
      if (!pending || res.writableNeedDrain) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = () => undefined;
        continue;
      }
      pending = false;
      const read = access.ring.read(cursorAt, KV_EVENTS_MAX_BATCH);
      if (read.records.length === 0 && !read.reset) continue;
      cursorAt = read.next;
      res.write(`id: ${read.next}\nevent: kv\ndata: ${JSON.stringify(wireBatch(read, access, Date.now()))}\n\n`);
      pending = access.ring.lastSeq > cursorAt;
    }
  } finally {
    clearInterval(keepalive);
    unsubscribe();
    res.off('close', notify);
    res.off('drain', notify);
    shutdown.removeEventListener('abort', notify);
    if (!res.writableEnded) res.end();
  }
}

/** The access when the caller may read: 404 when the route is off, 401 without one of its keys. */
function admitted(req: IncomingMessage, res: ServerResponse, ctx: KvEventsContext): KvEventsAccess | null {
  const access = ctx.kvEvents;
  if (access === null || access.keys.length === 0) {
    const path = (req.url ?? '/').split('?', 1)[0] as string;
    sendProblem(res, problem('route_not_found', `Invalid URL (${req.method ?? 'GET'} ${path}).`));
    return null;
  }
  if (ctx.faults.has('open-kv-events')) return access; // the negative control of this gate
  const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (match === null) {
    sendProblem(
      res,
      problem('unauthorized', 'KV events need the admin key or the cluster secret: `Authorization: Bearer KEY`.'),
    );
    return null;
  }
  const given = digest(match[1] as string);
  // Every key is compared (no early exit), each in constant time over equal-length digests.
  const ok = access.keys.map((key) => timingSafeEqual(given, digest(key))).includes(true);
  if (!ok) {
    sendProblem(res, problem('unauthorized', 'Invalid key for KV events (a tenant API key is not one).'));
    return null;
  }
  return access;
}

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** A query cursor: absent is 0; a whole number; else null. */
function cursor(text: string | null): number | null {
  if (text === null || text === '') return 0;
  if (!/^\d{1,15}$/.test(text)) return null;
  return Number(text);
}
