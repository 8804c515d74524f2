// The decode side of the KV transfer: reserve pages, receive and check every frame, verify
// coverage from decode's own stamps, hand the request to the decoder, report to the router.
// Owns: one record per request on this decode node, its state, waits and tombstone.
// Must never: write a frame that fails a check, start decoding on a sender's claim, free pages
// a writer may still write (they are quarantined until its AbortAck or its connection closes),
// or send the router anything but an honest Failed for a request that went wrong.
//
// Life of a request on a decode node (R = router, P = the prefill that writes):
//   1. R: Reserve -> admission with this node's limits, pages (new epochs)   Idle -> AwaitingKv
//      (or Rejected before any allocation)                                     Idle -> Released
//   2. P: KvChunk -> checks, its payload lands as it arrives, checksum, stamp  -> Receiving
//   3. P: KvDone -> counts, digests, coverage of our own stamps; Ack -> P;
//      effect startDecoding: the worker decodes, the pages are its own now   -> Decoding
//   4. worker: decodeTokens -> Tokens -> R; decodeFinished -> Finished -> R    -> Finished
//   Abort (from R), a failed check, a timeout, or R's connection closing while receiving:
//      quarantine the pages, Abort -> P (when connected), Failed -> R           -> Aborting
//      P's AbortAck, or P's connection closed: release the pages                -> Released
//   A closed connection to P ends the requests whose frames came on it (nothing more of theirs
//   can arrive: P drops them too); requests with no frame on it keep waiting, as P sends them on
//   its next connection or tells us it dropped them (AbortAck).
//      no AbortAck after abortRetries re-sends: P is declared dead: closePeer(P), release on close
//      (the driver delivers `closed` for closePeer also when no connection was open)
//
//   Idle --Reserve--> AwaitingKv --KvChunk--> Receiving --KvDone ok--> Decoding --> Finished
//     |                  |  \________________________|                     |
//     | Rejected         |      fail / abort / timeout                     | abort, failure
//     v                  v               v                                 v
//   Released <------ (writer gave up) Aborting --AbortAck / close--> Released
import {
  AbortedError,
  assertNever,
  kvTenantOf,
  TimeoutError,
  TransferError,
  type QuarantineView,
  type RequestId,
  type TesseraError,
  type TokenLogprob,
  type TransferView,
} from '../core/index.js';
import type { Owner } from '../pages/index.js';
import { checkChunkHead, checkDone } from './decode-checks.js';
import { ChunkIntake, LandingChunk } from './decode-landing.js';
import type {
  Active,
  DecodeEffect,
  DecodeInput,
  DecodeMachineOptions,
  DecodeStats,
  Tombstone,
} from './decode-types.js';
import { TransferDigest } from './digests.js';
import type { DecodeHost } from './hosts.js';
import { countByState, ProtocolMachine, type PeerId } from './machine.js';
import { decodeTransfers } from './machine-views.js';
import type { AbortReason, FinishReason, KvChunk, KvChunkHead, KvDone, Message, Reserve } from './messages.js';

export class DecodeMachine extends ProtocolMachine<Active, Tombstone, DecodeInput, DecodeEffect> {
  readonly #host: DecodeHost;
  readonly #connected = new Set<PeerId>();
  readonly #intake: ChunkIntake;
  readonly #stats: DecodeStats = {
    reserved: 0,
    rejected: 0,
    transfersVerified: 0,
    transfersFailed: 0,
    framesWritten: 0,
    framesDropped: 0,
    checksumFailures: 0,
    bytesWritten: 0,
    abortsByState: {},
    writersDeclaredDead: 0,
    writersNeverConnected: 0,
  };

  constructor(options: DecodeMachineOptions) {
    super('decode', options);
    this.#host = options.host;
    this.#intake = new ChunkIntake(
      options.host.pool,
      (r) => this.book.active.get(r.rid) === r && (r.state === 'AwaitingKv' || r.state === 'Receiving'),
    );
  }

  override handle(nowMs: number, input: DecodeInput): DecodeEffect[] {
    if (input.kind === 'chunkPiece') {
      this.#intake.piece(input.from, input.bytes); // the hot path (thousands per GiB): no state change, no effect
      return [];
    }
    return super.handle(nowMs, input);
  }

  protected dispatch(input: DecodeInput): void {
    switch (input.kind) {
      case 'connected':
        this.#connected.add(input.peer);
        for (const r of this.book.active.values())
          if (r.state === 'Aborting' && r.writer === input.peer) this.#tellWriter(r);
        break;
      case 'received':
        this.#connected.add(input.from);
        this.#onMessage(input.from, input.message);
        break;
      case 'chunkBegin':
        this.#connected.add(input.from);
        this.tracer.recv(input.head.rid, 'KvChunk', input.from);
        this.#onChunkBegin(input.from, input.head);
        break;
      case 'chunkPiece': // handled in handle()
        break;
      case 'chunkEnd':
        this.#onChunkEnd(input.from);
        break;
      case 'closed':
        this.#onClosed(input.peer, input.reason);
        break;
      case 'tick':
        this.#onTick();
        break;
      case 'decodeTokens':
        this.#onTokens(input.rid, input.ids, input.logprobs);
        break;
      case 'decodeFinished':
        this.#onDecodeEnd(input.rid, undefined, input.finishReason);
        break;
      case 'decodeFailed':
        this.#onDecodeEnd(input.rid, input.error, undefined);
        break;
      default:
        assertNever(input, 'decode input');
    }
  }

  stats(): DecodeStats {
    return { ...this.#stats, abortsByState: { ...this.#stats.abortsByState } };
  }

  /** The transfers in flight here and the quarantined pages with why (the operator's page map). */
  inFlight(): { readonly transfers: TransferView[]; readonly quarantined: QuarantineView[] } {
    return decodeTransfers(this.book.active.values());
  }

  #onMessage(from: PeerId, m: Message): void {
    this.tracer.recv(m.rid, m.type, from);
    switch (m.type) {
      case 'Reserve':
        return this.#onReserve(from, m);
      case 'KvChunk':
      case 'KvDone':
        return this.#onFrame(from, m);
      case 'Abort':
        return this.#onAbort(from, m.rid, m.reason);
      case 'AbortAck':
        return this.#onAbortAck(from, m.rid);
      case 'Reserved':
      case 'Rejected':
      case 'Prefill':
      case 'Ack':
      case 'Tokens':
      case 'Finished':
      case 'Failed':
        return this.#drop(m.rid, m.type, 'not a message for decode');
      default:
        return assertNever(m, 'message');
    }
  }

  #onReserve(from: PeerId, m: Reserve): void {
    if (this.book.active.has(m.rid) || this.book.ended.has(m.rid)) return this.#drop(m.rid, 'Reserve', 'state');
    // Under a LoRA adapter the pages are owned as the adapter's (kvTenantOf), as on prefill.
    const tenant = kvTenantOf(m.tenant, m.adapter, this.faults.has('lora-drop-from-key'));
    const owner: Owner = { rid: m.rid, tenant };
    const verdict = this.#host.reserve(owner, m.promptTokens, m.sampling, m.adapter);
    if (verdict.kind === 'rejected') {
      this.#stats.rejected++;
      this.book.bury(m.rid, 'Idle', { state: 'Released', writer: m.prefillAddress, abortOwed: false });
      this.out.send(from, { type: 'Rejected', rid: m.rid, code: verdict.error.code, message: verdict.error.message });
      return;
    }
    this.#stats.reserved++;
    this.tracer.page(m.rid, 'allocate', verdict.tags);
    const r: Active = {
      rid: m.rid,
      owner,
      router: from,
      writer: m.prefillAddress,
      promptTokens: m.promptTokens,
      promptDigest: m.promptDigest,
      sampling: m.sampling,
      tags: verdict.tags,
      digest: new TransferDigest(),
      ...(m.adapter === undefined ? {} : { adapter: m.adapter.digest }),
      state: 'AwaitingKv',
      pages: 'allocated',
      nextSeq: 0,
      wait: this.waitFor(this.timeouts.kvStartMs, `the first KV frame from ${m.prefillAddress}`),
      abortRetries: 0,
      writerTold: false,
      bound: false,
      declaredDead: false,
      firstToken: -1,
      firstLogprobs: [],
      cachedTokens: 0,
      tokensSent: 0,
      firstFrameAtMs: undefined,
      bytes: 0,
      abortWhy: undefined,
    };
    this.book.active.set(m.rid, r);
    this.tracer.state(m.rid, 'Idle', 'AwaitingKv');
    this.out.send(from, {
      type: 'Reserved',
      rid: m.rid,
      tags: verdict.tags,
      pageSize: this.#host.pool.pageSize,
      dataAddress: this.node,
    });
  }

  #onFrame(from: PeerId, m: KvChunk | KvDone): void {
    if (m.type === 'KvChunk') {
      const { payload, ...fields } = m; // a whole KvChunk (as the simulation delivers them) is one piece
      this.#onChunkBegin(from, { ...fields, payloadBytes: payload.length });
      this.#intake.piece(from, payload);
      return this.#onChunkEnd(from);
    }
    const r = this.#frameTarget(from, m.rid, m.type);
    if (r !== undefined) this.#onDone(r, m);
  }

  /** The request a KvChunk or KvDone from `from` is for, when it may go on to its checks; else it is dropped here. */
  #frameTarget(from: PeerId, rid: RequestId, type: 'KvChunk' | 'KvDone'): Active | undefined {
    const r = this.book.active.get(rid);
    const t = r === undefined ? this.book.ended.get(rid) : undefined;
    if (t !== undefined && t.abortOwed && t.writer === from) {
      t.abortOwed = false;
      this.out.send(from, { type: 'Abort', rid, reason: 'decode-failed' });
    }
    let why: string | undefined;
    if (r === undefined) why = t === undefined ? 'unknown request' : 'state';
    else if (from !== r.writer) why = `peer: ${from} is not ${r.writer}, the prefill named in Reserve`;
    else {
      r.bound = true;
      if (r.state === 'Aborting') this.#tellWriter(r);
      if (r.state !== 'AwaitingKv' && r.state !== 'Receiving') why = 'state';
    }
    if (why === undefined) return r;
    this.#drop(rid, type, why);
    return undefined;
  }

  /** A KvChunk's header: checks 1-5 decide whether its payload may land at all. */
  #onChunkBegin(from: PeerId, m: KvChunkHead): void {
    this.#intake.begin(from);
    const r = this.#frameTarget(from, m.rid, 'KvChunk');
    if (r === undefined) return;
    const verdict = checkChunkHead(this.#host.pool, r, m, this.faults);
    switch (verdict.kind) {
      case 'drop':
        this.#stats.framesDropped++;
        return this.#drop(m.rid, 'KvChunk', verdict.why);
      case 'fail':
        return this.#failTransfer(r, verdict.error, 'decode-failed');
      case 'write':
        this.#intake.land(from, new LandingChunk(r, m, verdict.index, this.faults));
        return;
      default:
        assertNever(verdict, 'chunk verdict');
    }
  }

  /** The whole payload has landed: check 6 (the checksum), then stamp; or fail closed, nothing stamped. */
  #onChunkEnd(from: PeerId): void {
    const chunk = this.#intake.end(from);
    if (chunk === undefined) return;
    const { request: r, head: m } = chunk;
    const landed = chunk.finish(this.#host.pool, this.tracer);
    switch (landed.kind) {
      case 'stopped': // the request ended, or the page left it, while the payload arrived: the rest was not written
        if (this.book.active.get(r.rid) === r && r.state === 'Aborting') this.#tellWriter(r);
        if (landed.why !== 'state') this.#stats.framesDropped++;
        return this.#drop(r.rid, 'KvChunk', landed.why);
      case 'mismatch':
        this.#stats.checksumFailures++;
        return this.#failTransfer(r, landed.error, 'decode-failed');
      case 'stamped':
        break;
      default:
        assertNever(landed, 'landed chunk');
    }
    this.#stats.framesWritten++;
    this.#stats.bytesWritten += m.payloadBytes;
    r.bytes += m.payloadBytes;
    r.nextSeq++;
    r.digest.add(m.checksum);
    r.wait = this.waitFor(this.timeouts.frameMs, `the next KV frame or KvDone from ${r.writer}`);
    r.firstFrameAtMs ??= this.now;
    this.book.goto(r, 'Receiving');
  }

  #onDone(r: Active, m: KvDone): void {
    const failure = checkDone(this.#host, r, m, this.faults);
    if (failure !== undefined) {
      if (failure.checksum) this.#stats.checksumFailures++;
      return this.#failTransfer(r, failure.error, 'decode-failed');
    }
    this.#stats.transfersVerified++;
    r.firstToken = m.firstToken;
    r.firstLogprobs = m.firstLogprobs;
    if (m.promptLogprobs !== undefined) r.promptLogprobs = m.promptLogprobs;
    r.cachedTokens = m.cachedTokens ?? 0;
    r.wait = undefined;
    this.book.goto(r, 'Decoding');
    this.out.send(r.writer, { type: 'Ack', rid: r.rid });
    const transferMs = r.firstFrameAtMs === undefined ? null : this.now - r.firstFrameAtMs;
    this.out.push({
      kind: 'startDecoding',
      rid: r.rid,
      owner: r.owner,
      tags: r.tags,
      promptTokens: r.promptTokens,
      firstToken: m.firstToken,
      sampling: r.sampling,
      transferMs,
    });
  }

  #onAbort(from: PeerId, rid: RequestId, reason: AbortReason): void {
    const r = this.book.active.get(rid);
    if (r === undefined) {
      // Idle: remember the abort, so a Reserve that arrives late allocates nothing.
      if (!this.book.ended.has(rid))
        this.book.bury(rid, 'Idle', { state: 'Released', writer: undefined, abortOwed: false });
      return this.ackAbort(from, rid);
    }
    if (from !== r.router)
      return this.#drop(rid, 'Abort', `peer: ${from} is not ${r.router}, the router of this request`);
    switch (r.state) {
      case 'AwaitingKv':
      case 'Receiving':
        r.abortWhy = `Abort from the router (${reason})`;
        this.#abortTransfer(r);
        break;
      case 'Decoding':
        countByState(this.#stats.abortsByState, r.state);
        this.out.push({ kind: 'stopDecoding', rid, error: new AbortedError(reason) });
        this.#end(r, 'Released');
        break;
      case 'Aborting':
        break;
      default:
        assertNever(r.state, 'decode state');
    }
    this.ackAbort(from, rid);
  }

  #onAbortAck(from: PeerId, rid: RequestId): void {
    const r = this.book.active.get(rid);
    if (r === undefined) return this.#drop(rid, 'AbortAck', this.book.ended.has(rid) ? 'state' : 'unknown request');
    if (from !== r.writer)
      return this.#drop(rid, 'AbortAck', `peer: ${from} is not ${r.writer}, the prefill named in Reserve`);
    switch (r.state) {
      case 'Aborting':
        // The writer promises it will never write rid's pages again.
        return this.#giveBack(r);
      case 'AwaitingKv':
      case 'Receiving': {
        // The writer gave up: its admission or compute failed (it told the router), or the
        // connection that carried our chunks broke (nobody told the router). Nothing more will come.
        countByState(this.#stats.abortsByState, r.state);
        this.#stats.transfersFailed++;
        this.#giveBack(r);
        const error = new TransferError(`${rid}: prefill ${from} gave the transfer up before KvDone was verified`);
        this.out.send(r.router, { type: 'Failed', rid, code: error.code, message: error.message });
        return;
      }
      case 'Decoding':
        return this.#drop(rid, 'AbortAck', 'state');
      default:
        return assertNever(r.state, 'decode state');
    }
  }

  #onClosed(peer: PeerId, reason: string): void {
    this.#connected.delete(peer);
    this.#intake.forget(peer); // a KvChunk cut off mid-payload: its slots stay unstamped
    this.tracer.close(peer);
    for (const r of [...this.book.active.values()]) {
      if (r.writer === peer && !r.bound && !r.declaredDead && r.state !== 'Decoding') {
        // No frame of it came on that connection: the writer either never sent one (it sends on
        // its next connection) or lost them with this one, and then tells us with AbortAck. An
        // Abort we sent on it is lost: say it again when the writer is back.
        r.writerTold = false;
      } else if (r.writer === peer && (r.state === 'AwaitingKv' || r.state === 'Receiving')) {
        // Its frames came on that connection, and nothing from it will ever be handled again.
        countByState(this.#stats.abortsByState, r.state);
        this.#stats.transfersFailed++;
        this.#giveBack(r);
        const error = new TransferError(
          `${r.rid}: the connection to prefill ${peer} closed during the transfer (${reason})`,
        );
        this.out.send(r.router, { type: 'Failed', rid: r.rid, code: error.code, message: error.message });
      } else if (r.writer === peer && r.state === 'Aborting') {
        this.#giveBack(r);
      } else if (r.router === peer && (r.state === 'AwaitingKv' || r.state === 'Receiving')) {
        r.abortWhy = `the router's connection closed (${reason})`;
        this.#abortTransfer(r);
      } else if (r.router === peer && r.state === 'Decoding') {
        countByState(this.#stats.abortsByState, r.state);
        this.out.push({
          kind: 'stopDecoding',
          rid: r.rid,
          error: new AbortedError(`the router's connection closed (${reason})`),
        });
        this.#end(r, 'Released');
      }
    }
  }

  #onTick(): void {
    for (const r of [...this.book.active.values()]) {
      if (r.wait === undefined || r.wait.atMs > this.now) continue;
      const wait = r.wait;
      if (r.state === 'AwaitingKv' || r.state === 'Receiving') {
        this.#failTransfer(r, new TimeoutError(`${wait.waitingFor} (${r.rid})`, wait.timeoutMs), 'timeout');
      } else if (r.state === 'Aborting' && r.abortRetries < this.timeouts.abortRetries) {
        r.abortRetries++;
        r.writerTold = false;
        this.#tellWriter(r);
        r.wait = this.waitFor(this.timeouts.abortAckMs, wait.waitingFor);
      } else if (r.state === 'Aborting') {
        this.#declareDead(r);
      } else {
        r.wait = undefined;
      }
    }
  }

  /**
   * No AbortAck after every retry: close the writer's connection; the pages are released when
   * the close is handled (after our own close nothing from that connection is ever handled).
   * Also when the writer never connected: the close then marks the point after which a
   * connection it opens is a new one, whose frames for this request are dropped unread.
   */
  #declareDead(r: Active): void {
    r.wait = undefined;
    r.declaredDead = true;
    this.#stats.writersDeclaredDead++;
    if (!this.#connected.has(r.writer)) this.#stats.writersNeverConnected++;
    this.out.push({
      kind: 'closePeer',
      peer: r.writer,
      reason: `no AbortAck for ${r.rid} after ${r.abortRetries + 1} Aborts`,
    });
  }

  #onTokens(rid: RequestId, ids: readonly number[], logprobs: readonly TokenLogprob[]): void {
    const r = this.book.active.get(rid);
    if (r === undefined || r.state !== 'Decoding') return; // stopped meanwhile: the router already knows
    this.#sendTokens(r, ids, logprobs);
  }

  #onDecodeEnd(rid: RequestId, error: TesseraError | undefined, finishReason: FinishReason | undefined): void {
    const r = this.book.active.get(rid);
    if (r === undefined || r.state !== 'Decoding') return;
    if (error !== undefined) {
      this.#end(r, 'Released');
      this.out.send(r.router, { type: 'Failed', rid, code: error.code, message: error.message });
      return;
    }
    if (r.tokensSent === 0) this.#sendTokens(r, [], []);
    this.#end(r, 'Finished');
    this.out.send(r.router, {
      type: 'Finished',
      rid,
      finishReason: finishReason ?? 'stop',
      promptTokens: r.promptTokens,
      completionTokens: r.tokensSent,
      ...(r.cachedTokens > 0 ? { cachedTokens: r.cachedTokens } : {}),
    });
  }

  /** `logprobs`: one per id when the request asked for them (KvDone's first token's go first). */
  #sendTokens(r: Active, ids: readonly number[], logprobs: readonly TokenLogprob[]): void {
    const [all, allLogprobs] =
      r.tokensSent === 0
        ? [
            [r.firstToken, ...ids],
            [...r.firstLogprobs, ...logprobs],
          ]
        : [ids, logprobs];
    if (all.length === 0) return;
    const prompt = r.tokensSent === 0 && r.promptLogprobs !== undefined ? { promptLogprobs: r.promptLogprobs } : {};
    this.out.send(r.router, {
      type: 'Tokens',
      rid: r.rid,
      offset: r.tokensSent,
      ids: all,
      logprobs: allLogprobs,
      ...prompt,
    });
    r.tokensSent += all.length;
  }

  /** A check failed or a wait ran out while receiving: abort the transfer and tell the router. */
  #failTransfer(r: Active, error: TesseraError, reason: AbortReason): void {
    this.#stats.transfersFailed++;
    r.abortWhy = `${reason}: ${error.message}`;
    this.#abortTransfer(r, reason);
    this.out.send(r.router, { type: 'Failed', rid: r.rid, code: error.code, message: error.message });
  }

  /** The writer may still write: quarantine, tell it to stop, wait for its AbortAck. */
  #abortTransfer(r: Active, reason: AbortReason = 'decode-failed'): void {
    r.abortWhy ??= reason;
    countByState(this.#stats.abortsByState, r.state);
    if (this.faults.has('free-before-ack')) {
      this.#host.free(r.owner, r.tags); // the negative control: a late write could land in a reused page
      this.tracer.page(r.rid, 'free', r.tags);
      r.pages = 'none';
    } else {
      this.#host.quarantine(r.owner, r.tags);
      this.tracer.page(r.rid, 'quarantine', r.tags);
      r.pages = 'quarantined';
    }
    this.book.goto(r, 'Aborting');
    r.abortRetries = 0;
    r.wait = this.waitFor(this.timeouts.abortAckMs, `AbortAck from ${r.writer}`);
    this.#tellWriter(r, reason);
  }

  #tellWriter(r: Active, reason: AbortReason = 'decode-failed'): void {
    if (r.writerTold || !this.#connected.has(r.writer)) return;
    r.writerTold = true;
    this.out.send(r.writer, { type: 'Abort', rid: r.rid, reason });
  }

  /** The writer will never write again (AbortAck, gave up, or its connection closed): pages back, Released. */
  #giveBack(r: Active): void {
    if (r.pages === 'allocated') {
      this.#host.free(r.owner, r.tags);
      this.tracer.page(r.rid, 'free', r.tags);
    } else if (r.pages === 'quarantined') {
      this.#host.release(r.owner, r.tags);
      this.tracer.page(r.rid, 'release', r.tags);
    }
    r.pages = 'none';
    this.#end(r, 'Released');
  }

  /** r ends; its writer is still owed an Abort when the request ended while KV could still come. */
  #end(r: Active, to: 'Finished' | 'Released'): void {
    const owed = r.state === 'Aborting' || r.state === 'AwaitingKv' || r.state === 'Receiving' ? !r.writerTold : false;
    this.book.end(r, { state: to, writer: r.writer, abortOwed: owed });
  }

  #drop(rid: string, message: Message['type'], why: string): void {
    this.tracer.drop(rid, message, why);
  }
}
