// The prefill side of the KV transfer: admit, stream the computed K/V to decode's tagged pages
// as checksummed chunks, claim completion in KvDone, hold the source pages until decode's Ack.
// Owns: one record per request on this prefill node, its state, waits and tombstone.
// Must never: send a byte before admission, send a chunk for a page it has not computed and
// checked (checkRead on its own stamps), give the source pages back while a compute step may
// still write them, or send AbortAck before it has stopped writing for good.
//
// Life of a request on a prefill node (R = router, D = decode):
//   1. R: Prefill -> page geometry, then host.admit (this node's limits)   Idle -> Computing
//      (or Rejected -> R, and an unsolicited AbortAck -> D)               Idle -> Aborted
//   2. worker: computed(n, tags) -> KvChunk(seq, D's tag, slots, checksum) for new positions
//   3. worker: computeDone(firstToken) -> the last chunks, KvDone -> D      -> AwaitingAck
//   4. D: Ack -> host.release (the source pages go back)                    -> Released
//   Abort (from R or D), a failed compute, or a closed connection that carried its chunks: host.stop; once nothing
//   writes any more (at once, or at computeStopped) -> AbortAck to D and to whoever asked
//                                                          Computing -> Aborting -> Aborted
//   No Ack within ackMs: every chunk has left, so the source pages go back   -> Released
//
//   Idle --Prefill--> Computing --computeDone--> AwaitingAck --Ack / ack timeout--> Released
//     |                  |   \ (stopping)              |
//     | Rejected         |    Aborting --stopped--+    | Abort / D closed
//     +------------------+------------------------+----+---------------------> Aborted
import {
  assert,
  assertNever,
  isPageCheckError,
  kvTenantOf,
  TransferError,
  type RequestId,
  type Tag,
  type TesseraError,
  type TokenLogprob,
  type TransferView,
} from '../core/index.js';
import { pagesFor, type Owner } from '../pages/index.js';
import { chunkChecksum, promptDigest, TransferDigest } from './digests.js';
import type { PrefillHost } from './hosts.js';
import {
  countByState,
  ProtocolMachine,
  type Deadline,
  type MachineOptions,
  type NetworkEffect,
  type NetworkInput,
  type PeerId,
} from './machine.js';
import { prefillTransfers } from './machine-views.js';
import type { Message, Prefill } from './messages.js';

export const PREFILL_STATES = ['Computing', 'AwaitingAck', 'Aborting', 'Released', 'Aborted'] as const;
export type PrefillState = (typeof PREFILL_STATES)[number];

export type PrefillInput =
  | NetworkInput
  /** Positions [0, numTokens) of rid's prompt are computed and stamped in `tags` (this node's page table). */
  | { readonly kind: 'computed'; readonly rid: RequestId; readonly numTokens: number; readonly tags: readonly Tag[] }
  /** The whole prompt is computed into `tags`; firstToken was sampled from its last position. */
  | {
      readonly kind: 'computeDone';
      readonly rid: RequestId;
      readonly tags: readonly Tag[];
      readonly firstToken: number;
      /** Its log-probabilities, when asked for; else empty. */ readonly firstLogprobs: readonly TokenLogprob[];
      /** Prompt tokens from prefill's prefix cache (for usage). */ readonly cachedTokens?: number;
      /** sampling.promptLogprobs: prompt tokens 1.. log-probabilities (KvDone carries them). */
      readonly promptLogprobs?: readonly TokenLogprob[];
    }
  /** The compute failed; its pages are back. */
  | { readonly kind: 'computeFailed'; readonly rid: RequestId; readonly error: TesseraError }
  /** After host.stop() said 'stopping': the step ended and the pages are back. */
  | { readonly kind: 'computeStopped'; readonly rid: RequestId };

/** A prefill node's compute starts inside host.admit(), so its effects are network effects only. */
export type PrefillEffect = NetworkEffect;

export interface PrefillMachineOptions extends MachineOptions {
  readonly host: PrefillHost;
}

export interface PrefillStats {
  admitted: number;
  rejected: number;
  chunksSent: number;
  bytesSent: number;
  transfersAcked: number;
  ackTimeouts: number;
  abortsByState: Record<string, number>;
}

interface Active {
  readonly rid: RequestId;
  readonly owner: Owner;
  readonly router: PeerId;
  readonly decode: PeerId;
  readonly dstTags: readonly Tag[];
  readonly numTokens: number;
  readonly promptDigest: string;
  readonly digest: TransferDigest;
  state: 'Computing' | 'AwaitingAck' | 'Aborting';
  sentTokens: number;
  /** KV payload bytes sent so far (the dashboard's transfer progress). */
  sentBytes: number;
  seq: number;
  /** Peers owed an AbortAck once nothing writes any more (decode always, unless its connection closed). */
  readonly ackTo: Set<PeerId>;
  wait: Deadline | undefined;
  /** The digest of the LoRA adapter it computes under (KvDone carries it); absent: the base model. */
  readonly adapter?: string;
}

interface Tombstone {
  readonly state: 'Released' | 'Aborted';
  readonly expiresAtMs: number;
}

export class PrefillMachine extends ProtocolMachine<Active, Tombstone, PrefillInput, PrefillEffect> {
  readonly #host: PrefillHost;
  readonly #stats: PrefillStats = {
    admitted: 0,
    rejected: 0,
    chunksSent: 0,
    bytesSent: 0,
    transfersAcked: 0,
    ackTimeouts: 0,
    abortsByState: {},
  };

  constructor(options: PrefillMachineOptions) {
    super('prefill', options);
    this.#host = options.host;
  }

  protected dispatch(input: PrefillInput): void {
    switch (input.kind) {
      case 'connected':
        break;
      case 'received':
        this.#onMessage(input.from, input.message);
        break;
      case 'closed':
        this.#onClosed(input.peer, input.reason);
        break;
      case 'tick':
        this.#onTick();
        break;
      case 'computed':
        this.#onComputed(input.rid, input.numTokens, input.tags, undefined);
        break;
      case 'computeDone':
        this.#onComputed(
          input.rid,
          undefined,
          input.tags,
          input.firstToken,
          input.firstLogprobs,
          input.cachedTokens ?? 0,
          input.promptLogprobs,
        );
        break;
      case 'computeFailed':
        this.#onComputeEnded(input.rid, input.error);
        break;
      case 'computeStopped':
        this.#onComputeEnded(input.rid, undefined);
        break;
      default:
        assertNever(input, 'prefill input');
    }
  }

  stats(): PrefillStats {
    return { ...this.#stats, abortsByState: { ...this.#stats.abortsByState } };
  }

  /** The transfers in flight from here (the operator's page map). */
  inFlight(): TransferView[] {
    return prefillTransfers(this.book.active.values());
  }

  #onMessage(from: PeerId, m: Message): void {
    this.tracer.recv(m.rid, m.type, from);
    switch (m.type) {
      case 'Prefill':
        return this.#onPrefill(from, m);
      case 'Ack': {
        const r = this.book.active.get(m.rid);
        if (r === undefined || r.state !== 'AwaitingAck')
          return this.tracer.drop(
            m.rid,
            m.type,
            r === undefined && !this.book.ended.has(m.rid) ? 'unknown request' : 'state',
          );
        if (from !== r.decode) return this.tracer.drop(m.rid, m.type, `peer: ${from} is not ${r.decode}`);
        this.#stats.transfersAcked++;
        this.#host.release(r.owner);
        return this.book.end(r, { state: 'Released' });
      }
      case 'Abort':
        return this.#onAbort(from, m.rid);
      case 'Reserve':
      case 'Reserved':
      case 'Rejected':
      case 'KvChunk':
      case 'KvDone':
      case 'Tokens':
      case 'Finished':
      case 'Failed':
      case 'AbortAck':
        return this.tracer.drop(m.rid, m.type, 'not a message for prefill');
      default:
        return assertNever(m, 'message');
    }
  }

  #onPrefill(from: PeerId, m: Prefill): void {
    if (this.book.active.has(m.rid) || this.book.ended.has(m.rid)) return this.tracer.drop(m.rid, 'Prefill', 'state');
    // Under a LoRA adapter the pages are owned and cached as the adapter's (kvTenantOf).
    const tenant = kvTenantOf(m.tenant, m.adapter, this.faults.has('lora-drop-from-key'));
    const owner: Owner = { rid: m.rid, tenant };
    const pageSize = this.#host.pool.pageSize;
    let error: TesseraError | undefined;
    if (m.pageSize !== pageSize) {
      error = new TransferError(
        `${m.rid}: decode pages hold ${m.pageSize} slots, this prefill's ${pageSize}; the cluster's page sizes must match`,
      );
    } else if (m.tags.length !== pagesFor(m.tokens.length, pageSize)) {
      error = new TransferError(
        `${m.rid}: ${m.tags.length} destination tags for a prompt of ${m.tokens.length} tokens in pages of ${pageSize}`,
      );
    } else {
      const verdict = this.#host.admit(owner, m.tokens, m.sampling, m.adapter);
      if (verdict.kind === 'rejected') error = verdict.error;
    }
    if (error !== undefined) {
      // Rejected before any page is allocated or any byte moves; decode may free its reservation.
      this.#stats.rejected++;
      this.book.bury(m.rid, 'Idle', { state: 'Aborted' });
      this.out.send(from, { type: 'Rejected', rid: m.rid, code: error.code, message: error.message });
      this.ackAbort(m.decodeAddress, m.rid);
      return;
    }
    this.#stats.admitted++;
    const r: Active = {
      rid: m.rid,
      owner,
      router: from,
      decode: m.decodeAddress,
      dstTags: m.tags,
      numTokens: m.tokens.length,
      promptDigest: promptDigest(m.tokens),
      digest: new TransferDigest(),
      state: 'Computing',
      sentTokens: 0,
      sentBytes: 0,
      seq: 0,
      ackTo: new Set([m.decodeAddress]),
      wait: undefined,
      ...(m.adapter === undefined ? {} : { adapter: m.adapter.digest }),
    };
    this.book.active.set(m.rid, r);
    this.tracer.state(m.rid, 'Idle', 'Computing');
  }

  #onComputed(
    rid: RequestId,
    numTokens: number | undefined,
    tags: readonly Tag[],
    firstToken: number | undefined,
    firstLogprobs: readonly TokenLogprob[] = [],
    cachedTokens = 0,
    promptLogprobs?: readonly TokenLogprob[],
  ): void {
    const r = this.book.active.get(rid);
    if (r === undefined) return;
    if (r.state === 'Aborting' && firstToken !== undefined) return this.#onComputeEnded(rid, undefined); // the step ended instead of stopping
    if (r.state !== 'Computing') return;
    const upTo = numTokens ?? r.numTokens;
    assert(
      Number.isInteger(upTo) && upTo >= r.sentTokens && upTo <= r.numTokens,
      () => `${rid}: computed(${upTo}) after ${r.sentTokens} of ${r.numTokens} tokens`,
    );
    // placeholder-done (the incident): only the first page is ever sent, the whole prompt is claimed.
    const limit = this.faults.has('placeholder-done') ? Math.min(upTo, this.#host.pool.pageSize) : upTo;
    if (!this.#sendChunks(r, limit, tags)) return;
    if (firstToken === undefined) return;
    this.out.send(r.decode, {
      type: 'KvDone',
      rid,
      numChunks: r.seq,
      tokensCovered: r.numTokens,
      digest: r.digest.hex(),
      promptDigest: r.promptDigest,
      model: this.#host.model,
      ...(r.adapter === undefined ? {} : { adapter: r.adapter }),
      firstToken,
      firstLogprobs,
      ...(cachedTokens > 0 ? { cachedTokens } : {}),
      ...(promptLogprobs === undefined ? {} : { promptLogprobs }),
    });
    this.book.goto(r, 'AwaitingAck');
    r.wait = this.waitFor(this.timeouts.ackMs, `Ack from ${r.decode}`);
  }

  /** KvChunk frames for positions [sentTokens, limit), one per page touched. False when our own page check failed. */
  #sendChunks(r: Active, limit: number, tags: readonly Tag[]): boolean {
    if (limit <= r.sentTokens) return true;
    const pool = this.#host.pool;
    try {
      pool.checkRead(r.owner, tags, limit);
    } catch (error) {
      if (!isPageCheckError(error)) throw error;
      this.#failWhileComputing(
        r,
        new TransferError(`${r.rid}: prefill's own page check failed before sending: ${error.message}`, error),
      );
      return false;
    }
    const pageSize = pool.pageSize;
    while (r.sentTokens < limit) {
      const index = Math.floor(r.sentTokens / pageSize);
      const firstSlot = r.sentTokens % pageSize;
      const numSlots = Math.min(pageSize - firstSlot, limit - r.sentTokens);
      const payload = pool.gatherSlots((tags[index] as Tag).page, firstSlot, numSlots);
      const header = {
        rid: r.rid,
        seq: r.seq,
        tag: r.dstTags[index] as Tag,
        firstSlot,
        numSlots,
        kvDtype: pool.kv.dtype,
      };
      const checksum = chunkChecksum(header, payload);
      if (this.faults.has('corrupt-chunk') && r.seq === 0) {
        const bit = (r.rid.length * 31 + r.numTokens) % (payload.length * 8);
        payload[bit >> 3] = (payload[bit >> 3] as number) ^ (1 << (bit & 7));
      }
      this.out.send(r.decode, { type: 'KvChunk', ...header, checksum, payload });
      r.digest.add(checksum);
      r.seq++;
      r.sentTokens += numSlots;
      this.#stats.chunksSent++;
      this.#stats.bytesSent += payload.length;
      r.sentBytes += payload.length;
    }
    return true;
  }

  #onAbort(from: PeerId, rid: RequestId): void {
    const r = this.book.active.get(rid);
    if (r === undefined) {
      // Idle: remember, so a Prefill that arrives late is refused; ended: acknowledge again.
      if (!this.book.ended.has(rid)) this.book.bury(rid, 'Idle', { state: 'Aborted' });
      return this.ackAbort(from, rid);
    }
    if (from !== r.router && from !== r.decode)
      return this.tracer.drop(rid, 'Abort', `peer: ${from} is neither the router nor the decode of ${rid}`);
    r.ackTo.add(from);
    switch (r.state) {
      case 'Computing':
        return this.#stop(r);
      case 'AwaitingAck':
        countByState(this.#stats.abortsByState, r.state);
        this.#host.release(r.owner);
        return this.#finishAbort(r);
      case 'Aborting':
        return;
      default:
        return assertNever(r.state, 'prefill state');
    }
  }

  #onClosed(peer: PeerId, reason: string): void {
    this.tracer.close(peer);
    for (const r of [...this.book.active.values()]) {
      if (r.decode === peer) {
        // Chunks sent on that connection may be lost: such a transfer cannot go on, and decode,
        // if it saw none of them, learns it from our AbortAck (on a new connection). A transfer
        // that sent nothing yet goes on over the next connection.
        if (r.state === 'Computing' && r.seq === 0) continue;
        if (r.state === 'Computing') {
          this.#failWhileComputing(
            r,
            new TransferError(`${r.rid}: the connection to decode ${peer} closed during the transfer (${reason})`),
          );
        } else if (r.state === 'AwaitingAck') {
          countByState(this.#stats.abortsByState, r.state);
          this.#host.release(r.owner);
          this.#finishAbort(r);
        }
      } else if (r.router === peer && r.state === 'Computing') {
        this.#stop(r); // nobody will read this request's tokens
      }
    }
  }

  #onTick(): void {
    for (const r of [...this.book.active.values()]) {
      if (r.wait === undefined || r.wait.atMs > this.now || r.state !== 'AwaitingAck') continue;
      // Every chunk has left this node: nothing reads the source pages any more.
      this.#stats.ackTimeouts++;
      this.#host.release(r.owner);
      this.book.end(r, { state: 'Released' });
    }
  }

  #onComputeEnded(rid: RequestId, error: TesseraError | undefined): void {
    const r = this.book.active.get(rid);
    if (r === undefined) return;
    if (r.state === 'Aborting') return this.#finishAbort(r);
    if (r.state === 'Computing' && error !== undefined) {
      countByState(this.#stats.abortsByState, r.state);
      this.#finishAbort(r);
      this.out.send(r.router, { type: 'Failed', rid, code: error.code, message: error.message });
    }
  }

  /** The transfer cannot go on: stop computing, tell the router, and decode once nothing writes. */
  #failWhileComputing(r: Active, error: TesseraError): void {
    this.#stop(r);
    this.out.send(r.router, { type: 'Failed', rid: r.rid, code: error.code, message: error.message });
  }

  #stop(r: Active): void {
    countByState(this.#stats.abortsByState, r.state);
    if (this.#host.stop(r.owner) === 'stopped') return this.#finishAbort(r);
    this.book.goto(r, 'Aborting');
  }

  /** Nothing writes rid's pages any more and ours are back: Aborted, AbortAck to everyone owed one. */
  #finishAbort(r: Active): void {
    this.book.end(r, { state: 'Aborted' });
    for (const peer of r.ackTo) this.ackAbort(peer, r.rid);
  }
}
