// The router side of the KV transfer: pair a prefill and a decode for each client request,
// relay Reserve -> Reserved -> Prefill, stream Tokens to the client, and tell the client the
// truth once: success only after decode's Finished with every token in order, else an error.
// Owns: the client requests, their attempts (one protocol request each), waits and outcomes.
// Must never: cut a transfer (a client disconnect becomes Abort through the acknowledged path),
// report success for an attempt that any node failed, or decide a client's outcome twice.
//
// Life of a client request (P = prefill, D = decode of the chosen pair):
//   1. submit: admission against the router's context length               Idle -> Reserving
//      (or an AdmissionError at once)                                      Idle -> Failed
//   2. Reserve -> D; Reserved -> Prefill -> P (with D's tags and address)   -> Prefilling
//   3. Tokens (offset 0) from D: forward to the client                      -> Streaming
//   4. Finished from D, with completionTokens = tokens forwarded            -> Succeeded
//   Rejected / Failed from D or P, a closed connection: the client's error  -> Failed
//   clientGone, a timeout, tokens out of order: Abort -> D (and -> P while
//   prefilling), the client's error at once; D's AbortAck or cancelMs        -> Cancelling -> Failed
//   Retry: P fails (or its connection closes) while Prefilling, before any token: the attempt
//   ends without an outcome (Failed; Cancelling with Abort -> D when P's connection closed) and
//   a new attempt, rid "<rid>.<n>" (request-ids.ts), reserves afresh (new epochs) with another prefill; at most
//   maxAttempts attempts. The client sees one outcome, traced under the deciding attempt's rid.
// Load and metrics are explicit: inFlightOn(peer) and attemptsByState() count live attempts, and
// the `transferTimed` effect reports Prefill-to-first-tokens; none of it is read off the trace.
import {
  AbortedError,
  assertNever,
  InvariantError,
  TesseraError,
  TimeoutError,
  TransferError,
  type ErrorCode,
  type AdapterRef,
  type PairView,
  type RequestId,
  type SamplingParams,
  type TenantId,
  type TokenLogprob,
} from '../core/index.js';
import { contextLengthError, requestShapeError } from '../pages/index.js';
import { promptDigest } from './digests.js';
import {
  countByState,
  ProtocolMachine,
  type Deadline,
  type MachineOptions,
  type NetworkEffect,
  type NetworkInput,
  type PeerId,
} from './machine.js';
import { countStates, routerPairs } from './machine-views.js';
import type { AbortReason, FinishReason, Message } from './messages.js';
import { attemptRid } from './request-ids.js';

export const ROUTER_STATES = ['Reserving', 'Prefilling', 'Streaming', 'Cancelling', 'Succeeded', 'Failed'] as const;
export type RouterState = (typeof ROUTER_STATES)[number];

export interface ClientRequest {
  readonly rid: RequestId;
  readonly tenant: TenantId;
  readonly tokens: readonly number[];
  readonly sampling: SamplingParams;
  /** The LoRA adapter it runs with (absent: the base model), sent in Reserve and Prefill. */
  readonly adapter?: AdapterRef;
}

export interface Pair {
  readonly prefill: PeerId;
  readonly decode: PeerId;
}

/** The pair policy (pure, e.g. by load): undefined when no pair is available. */
export type PickPair = (request: ClientRequest, avoid: { readonly prefills: readonly PeerId[] }) => Pair | undefined;

export type RouterInput =
  | NetworkInput
  | { readonly kind: 'submit'; readonly request: ClientRequest }
  /** The client went away: the request is aborted through the protocol, never cut. */
  | { readonly kind: 'clientGone'; readonly rid: RequestId };

export type ClientOutcome =
  | {
      readonly ok: true;
      readonly attempt: RequestId;
      readonly finishReason: FinishReason;
      readonly promptTokens: number;
      readonly completionTokens: number;
      readonly cachedTokens?: number;
    }
  | { readonly ok: false; readonly error: TesseraError };

export type RouterEffect =
  | NetworkEffect
  | {
      readonly kind: 'clientTokens';
      readonly rid: RequestId;
      readonly ids: readonly number[];
      readonly logprobs: readonly TokenLogprob[];
      /** With the first: the prompt's tokens 1.. log-probabilities (Tokens.promptLogprobs). */
      readonly promptLogprobs?: readonly TokenLogprob[];
    }
  /** The one and only outcome of a client request. */
  | { readonly kind: 'clientOutcome'; readonly rid: RequestId; readonly outcome: ClientOutcome }
  /** A metric, not a decision: an attempt's first tokens arrived `ms` after its Prefill was sent (client rid). */
  | { readonly kind: 'transferTimed'; readonly rid: RequestId; readonly ms: number };

/** A router has no fault points of its own (`faults` is unused). */
export interface RouterMachineOptions extends MachineOptions {
  /** The router's own context length: prompt + max_tokens above it is refused before any Reserve. */
  readonly contextLength: number;
  readonly pickPair: PickPair;
  /** Attempts per client request (a prefill failure before any token may be retried). Default 2. */
  readonly maxAttempts?: number;
}

export interface RouterStats {
  submitted: number;
  succeeded: number;
  failed: number;
  retries: number;
  /** Cancelled attempts whose decode never acknowledged the Abort within cancelMs. */
  cancelTimeouts: number;
  failuresByCode: Record<string, number>;
  /** Attempts cancelled (client gone, timeout, out-of-order tokens), by the state they were in. */
  abortsByState: Record<string, number>;
}

interface Client {
  readonly request: ClientRequest;
  readonly digest: string;
  readonly triedPrefills: PeerId[];
  attempts: number;
  current: Attempt | undefined;
  decided: boolean;
}

interface Attempt {
  readonly rid: RequestId;
  readonly client: Client;
  readonly pair: Pair;
  state: 'Reserving' | 'Prefilling' | 'Streaming' | 'Cancelling';
  wait: Deadline | undefined;
  tokensForwarded: number;
  /** When the Prefill went out (machine time), for `transferTimed`. */
  prefillSentMs: number | undefined;
}

interface Tombstone {
  readonly state: 'Succeeded' | 'Failed';
  readonly expiresAtMs: number;
}

const RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'overloaded',
  'transfer_failed',
  'internal',
  'timeout',
  'kv_page_check_failed',
]);

export class RouterMachine extends ProtocolMachine<Attempt, Tombstone, RouterInput, RouterEffect> {
  readonly #contextLength: number;
  readonly #pickPair: PickPair;
  readonly #maxAttempts: number;
  readonly #clients = new Map<RequestId, Client>();
  /** Live attempts per worker (either side of the pair): the load the pair policy balances. */
  readonly #inFlight = new Map<PeerId, number>();
  readonly #stats: RouterStats = {
    submitted: 0,
    succeeded: 0,
    failed: 0,
    retries: 0,
    cancelTimeouts: 0,
    failuresByCode: {},
    abortsByState: {},
  };

  constructor(options: RouterMachineOptions) {
    super('router', options);
    this.#contextLength = options.contextLength;
    this.#pickPair = options.pickPair;
    this.#maxAttempts = options.maxAttempts ?? 2;
  }

  protected dispatch(input: RouterInput): void {
    switch (input.kind) {
      case 'submit':
        this.#onSubmit(input.request);
        break;
      case 'clientGone': {
        const a = this.#clients.get(input.rid)?.current;
        if (a !== undefined && a.state !== 'Cancelling')
          this.#cancel(a, new AbortedError('the client disconnected'), 'client-disconnect');
        break;
      }
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
      default:
        assertNever(input, 'router input');
    }
  }

  /** The attempts in flight and their pairs (the operator's page map). */
  inFlight(): PairView[] {
    return routerPairs(this.book.active.values());
  }

  stats(): RouterStats {
    return {
      ...this.#stats,
      failuresByCode: { ...this.#stats.failuresByCode },
      abortsByState: { ...this.#stats.abortsByState },
    };
  }

  /** The client request (its rid as submitted) that attempt `rid` belongs to, while the attempt lives. */
  clientOf(rid: RequestId): RequestId | undefined {
    return this.book.active.get(rid)?.client.request.rid;
  }

  /** Attempts live on `peer` (as the prefill or the decode of their pair), from Reserve until the attempt ends. */
  inFlightOn(peer: PeerId): number {
    return this.#inFlight.get(peer) ?? 0;
  }

  /** Live attempts by state (Reserving, Prefilling, Streaming, Cancelling). */
  attemptsByState(): Record<string, number> {
    return countStates(this.book.active.values());
  }

  #onSubmit(request: ClientRequest): void {
    if (this.#clients.has(request.rid) || this.book.active.has(request.rid) || this.book.ended.has(request.rid)) {
      throw new InvariantError(`submit: request id ${request.rid} is already in use`);
    }
    this.#stats.submitted++;
    const client: Client = {
      request,
      digest: promptDigest(request.tokens),
      triedPrefills: [],
      attempts: 0,
      current: undefined,
      decided: false,
    };
    this.#clients.set(request.rid, client);
    const { length: numPromptTokens } = request.tokens;
    const { maxTokens } = request.sampling;
    let refusal =
      requestShapeError(numPromptTokens, maxTokens) ??
      contextLengthError(this.#contextLength, numPromptTokens, maxTokens);
    const pair = refusal === undefined ? this.#pickPair(request, { prefills: [] }) : undefined;
    if (refusal === undefined && pair === undefined)
      refusal = new TesseraError('overloaded', 'no prefill/decode pair is available; try again later');
    if (refusal !== undefined || pair === undefined) {
      this.book.bury(request.rid, 'Idle', { state: 'Failed' });
      return this.#decide(client, request.rid, { ok: false, error: refusal ?? new InvariantError('no pair') });
    }
    this.#start(client, pair);
  }

  #start(client: Client, pair: Pair): void {
    client.attempts++;
    client.triedPrefills.push(pair.prefill);
    const rid = attemptRid(client.request.rid, client.attempts);
    const wait = this.waitFor(this.timeouts.reserveMs, `Reserved from ${pair.decode}`);
    const a: Attempt = { rid, client, pair, state: 'Reserving', wait, tokensForwarded: 0, prefillSentMs: undefined };
    client.current = a;
    this.book.active.set(rid, a);
    this.#addLoad(pair, +1);
    this.tracer.state(rid, 'Idle', 'Reserving');
    const { tenant, tokens, sampling, adapter } = client.request;
    this.out.send(pair.decode, {
      type: 'Reserve',
      rid,
      tenant,
      promptTokens: tokens.length,
      promptDigest: client.digest,
      sampling,
      prefillAddress: pair.prefill,
      ...(adapter === undefined ? {} : { adapter }),
    });
  }

  #onMessage(from: PeerId, m: Message): void {
    this.tracer.recv(m.rid, m.type, from);
    const a = this.book.active.get(m.rid);
    if (a === undefined)
      return this.tracer.drop(m.rid, m.type, this.book.ended.has(m.rid) ? 'state' : 'unknown request');
    const fromDecode = from === a.pair.decode;
    const fromPrefill = from === a.pair.prefill;
    if (!fromDecode && !fromPrefill)
      return this.tracer.drop(m.rid, m.type, `peer: ${from} is not in the pair of ${m.rid}`);
    const drop = (): void => this.tracer.drop(m.rid, m.type, 'state');
    switch (m.type) {
      case 'Reserved': {
        if (!fromDecode || a.state !== 'Reserving') return drop();
        this.book.goto(a, 'Prefilling');
        a.wait = this.waitFor(
          this.timeouts.prefillMs,
          `the first token (prefill on ${a.pair.prefill}, KV transfer to ${a.pair.decode})`,
        );
        const { tenant, tokens, sampling, adapter } = a.client.request;
        a.prefillSentMs = this.now;
        this.out.send(a.pair.prefill, {
          type: 'Prefill',
          rid: a.rid,
          tenant,
          tokens,
          sampling,
          decodeAddress: m.dataAddress,
          tags: m.tags,
          pageSize: m.pageSize,
          ...(adapter === undefined ? {} : { adapter }),
        });
        return;
      }
      case 'Rejected':
        if (fromDecode && a.state === 'Reserving') return this.#fail(a, new TesseraError(m.code, m.message));
        if (fromPrefill && a.state === 'Prefilling')
          return this.#retryOrFail(a, new TesseraError(m.code, m.message), m.code === 'overloaded', false);
        return drop();
      case 'Tokens':
        if (!fromDecode || (a.state !== 'Prefilling' && a.state !== 'Streaming')) return drop();
        if (m.offset !== a.tokensForwarded) {
          return this.#cancel(
            a,
            new TransferError(
              `${a.rid}: Tokens at offset ${m.offset}, but ${a.tokensForwarded} tokens were forwarded (lost, repeated or reordered)`,
            ),
            'router',
          );
        }
        if (a.state === 'Prefilling' && a.prefillSentMs !== undefined) {
          this.out.push({ kind: 'transferTimed', rid: a.client.request.rid, ms: this.now - a.prefillSentMs });
        }
        this.book.goto(a, 'Streaming');
        a.tokensForwarded += m.ids.length;
        a.wait = this.waitFor(this.timeouts.tokenMs, `the next token from ${a.pair.decode}`);
        this.out.push({
          kind: 'clientTokens',
          rid: a.client.request.rid,
          ids: m.ids,
          logprobs: m.logprobs,
          ...(m.promptLogprobs === undefined ? {} : { promptLogprobs: m.promptLogprobs }),
        });
        return;
      case 'Finished':
        if (!fromDecode || a.state !== 'Streaming') return drop();
        if (m.completionTokens !== a.tokensForwarded || m.promptTokens !== a.client.request.tokens.length) {
          return this.#cancel(
            a,
            new TransferError(
              `${a.rid}: Finished reports ${m.promptTokens} + ${m.completionTokens} tokens, the router saw ${a.client.request.tokens.length} + ${a.tokensForwarded}`,
            ),
            'router',
          );
        }
        this.#end(a, 'Succeeded');
        this.#stats.succeeded++;
        return this.#decide(a.client, a.rid, {
          ok: true,
          attempt: a.rid,
          finishReason: m.finishReason,
          promptTokens: m.promptTokens,
          completionTokens: m.completionTokens,
          ...(m.cachedTokens === undefined ? {} : { cachedTokens: m.cachedTokens }),
        });
      case 'Failed':
        if (a.state === 'Cancelling') return drop();
        if (fromPrefill && a.state === 'Prefilling')
          return this.#retryOrFail(a, new TesseraError(m.code, m.message), RETRYABLE.has(m.code), false);
        if (fromDecode && a.state === 'Prefilling') {
          // Decode gave the transfer up before any token (a bad frame, its writer's connection
          // closed, a wait ran out): a prefill-side failure like the prefill's own Failed, which
          // often races it here (a killed prefill: decode may see the close first). Stop the
          // prefill; retry on another one where allowed.
          this.out.send(a.pair.prefill, { type: 'Abort', rid: a.rid, reason: 'decode-failed' });
          return this.#retryOrFail(a, new TesseraError(m.code, m.message), RETRYABLE.has(m.code), false);
        }
        return this.#fail(a, new TesseraError(m.code, m.message));
      case 'AbortAck':
        if (!fromDecode || a.state !== 'Cancelling') return drop();
        return this.#end(a, 'Failed');
      case 'Reserve':
      case 'Prefill':
      case 'KvChunk':
      case 'KvDone':
      case 'Ack':
      case 'Abort':
        return this.tracer.drop(m.rid, m.type, 'not a message for the router');
      default:
        return assertNever(m, 'message');
    }
  }

  #onClosed(peer: PeerId, reason: string): void {
    this.tracer.close(peer);
    for (const a of [...this.book.active.values()]) {
      if (a.pair.decode === peer) {
        if (a.state === 'Cancelling') this.#end(a, 'Failed');
        else {
          if (a.state === 'Prefilling')
            this.out.send(a.pair.prefill, { type: 'Abort', rid: a.rid, reason: 'decode-failed' });
          this.#fail(a, new TransferError(`${a.rid}: the connection to decode ${peer} closed (${reason})`));
        }
      } else if (a.pair.prefill === peer && a.state === 'Prefilling') {
        // The prefill may never have seen the Prefill: Abort decode, so its reservation does not wait for kvStartMs.
        this.#retryOrFail(
          a,
          new TransferError(`${a.rid}: the connection to prefill ${peer} closed (${reason})`),
          true,
          true,
        );
      }
    }
  }

  #onTick(): void {
    for (const a of [...this.book.active.values()]) {
      if (a.wait === undefined || a.wait.atMs > this.now) continue;
      if (a.state === 'Cancelling') {
        this.#stats.cancelTimeouts++;
        this.#end(a, 'Failed');
      } else this.#cancel(a, new TimeoutError(`${a.wait.waitingFor} (${a.rid})`, a.wait.timeoutMs), 'timeout');
    }
  }

  /**
   * The prefill failed before any token: try another pair if allowed, else the client's error.
   * A prefill that says Rejected or Failed has stopped and tells decode itself (AbortAck), so
   * the attempt just ends; a prefill whose connection closed may not have, so decode is aborted.
   */
  #retryOrFail(a: Attempt, error: TesseraError, retryable: boolean, abortDecode: boolean): void {
    const client = a.client;
    const pair =
      retryable && client.attempts < this.#maxAttempts
        ? this.#pickPair(client.request, { prefills: client.triedPrefills })
        : undefined;
    if (pair === undefined) return abortDecode ? this.#cancel(a, error, 'prefill-failed') : this.#fail(a, error);
    this.#stats.retries++;
    if (abortDecode) this.#abandon(a, 'prefill-failed');
    else this.#end(a, 'Failed');
    this.#start(client, pair);
  }

  /** r_abort: Abort -> D (and -> P while prefilling), wait for D's AbortAck; the client's error at once. */
  #cancel(a: Attempt, error: TesseraError, reason: AbortReason): void {
    this.#abandon(a, reason);
    this.#decide(a.client, a.rid, { ok: false, error });
  }

  #abandon(a: Attempt, reason: AbortReason): void {
    countByState(this.#stats.abortsByState, a.state);
    const wasPrefilling = a.state === 'Prefilling';
    this.book.goto(a, 'Cancelling');
    a.wait = this.waitFor(this.timeouts.cancelMs, `AbortAck from ${a.pair.decode}`);
    this.out.send(a.pair.decode, { type: 'Abort', rid: a.rid, reason });
    if (wasPrefilling && reason !== 'prefill-failed')
      this.out.send(a.pair.prefill, { type: 'Abort', rid: a.rid, reason });
  }

  #fail(a: Attempt, error: TesseraError): void {
    this.#end(a, 'Failed');
    this.#decide(a.client, a.rid, { ok: false, error });
  }

  #decide(client: Client, rid: RequestId, outcome: ClientOutcome): void {
    if (client.decided) return;
    client.decided = true;
    if (!outcome.ok) {
      this.#stats.failed++;
      this.#stats.failuresByCode[outcome.error.code] = (this.#stats.failuresByCode[outcome.error.code] ?? 0) + 1;
    }
    this.tracer.outcome(rid, outcome.ok ? 'success' : 'error', outcome.ok ? undefined : outcome.error.code);
    this.out.push({ kind: 'clientOutcome', rid: client.request.rid, outcome });
    this.#clients.delete(client.request.rid);
  }

  #end(a: Attempt, to: 'Succeeded' | 'Failed'): void {
    this.book.end(a, { state: to });
    this.#addLoad(a.pair, -1);
  }

  #addLoad(pair: Pair, by: 1 | -1): void {
    for (const peer of [pair.prefill, pair.decode]) {
      const n = (this.#inFlight.get(peer) ?? 0) + by;
      if (n === 0) this.#inFlight.delete(peer);
      else this.#inFlight.set(peer, n);
    }
  }
}
