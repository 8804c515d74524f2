// What the three protocol state machines (router, prefill, decode) have in common: peers, the
// network inputs and effects, timeouts, the outbox, the RequestBook, and `ProtocolMachine`, the
// skeleton each extends (handle, wakeAtMs, stateOf, traced moves and ends, AbortAck); each
// machine keeps only its own protocol. The tracer is trace.ts's. Sans-IO: a machine is driven by calling
// `handle(nowMs, input)`, which returns the effects for the driver to carry out, and tells the
// driver when to call it next with `wakeAtMs()` (then pass `{ kind: 'tick' }`).
// Must never: read a clock, draw randomness, touch sockets or timers, or throw for anything a
// peer can send (a peer's nonsense is dropped or fails a request; only our own bugs throw).
//
// The driver loop (worker, router, simulation):
//
//   const effects = machine.handle(now(), input);   // input: a message, a close, a tick, ...
//   for (const e of effects) carryOut(e);           // send, closePeer, compute, ...
//   armTimer(machine.wakeAtMs());                   // at that time: handle(now(), { kind: 'tick' })
//
// Contract: inputs are handled one at a time, and never while a compute or decode step that
// reads or writes this node's pages for an affected request is in flight (queue them and
// apply them between steps), except where a machine says it waits for the step to stop.
import { NO_FAULTS, type FaultSet, type RequestId } from '../core/index.js';
import type { KvChunkHead, Message } from './messages.js';
import { Tombstones } from './tombstones.js';
import { NO_TRACE, Tracer, type Role, type TraceSink } from './trace.js';

/** A node's identity on the cluster network: a worker's advertised internal address ("host:port"), or a router's name. */
export type PeerId = string;

/** Inputs every machine takes from its transport and its clock. */
export type NetworkInput =
  /** A connection with peer was authenticated; messages from it may follow. */
  | { readonly kind: 'connected'; readonly peer: PeerId }
  | { readonly kind: 'received'; readonly from: PeerId; readonly message: Message }
  /**
   * The connection with peer is gone (crash, reset, refused dial, or our own closePeer): nothing
   * more from it will ever be handled, and what we sent it that it had not read is lost.
   */
  | { readonly kind: 'closed'; readonly peer: PeerId; readonly reason: string }
  /** Time passed: fire the timeouts due at nowMs. */
  | { readonly kind: 'tick' };

/**
 * A KvChunk as it comes off the wire (TransportHandlers.chunks), for a machine that lands
 * payloads as they arrive (decode): its header, its payload in pieces, its end. A piece is a
 * view valid only during handle(). Whole KvChunks still come as `received`.
 */
export type ChunkInput =
  | { readonly kind: 'chunkBegin'; readonly from: PeerId; readonly head: KvChunkHead }
  | { readonly kind: 'chunkPiece'; readonly from: PeerId; readonly bytes: Uint8Array }
  | { readonly kind: 'chunkEnd'; readonly from: PeerId };

export type NetworkEffect =
  /** Put message on the connection to `to` (dialing it if this node dials that peer). */
  | { readonly kind: 'send'; readonly to: PeerId; readonly message: Message }
  /**
   * Close the connection with peer (declared dead). The driver must then deliver a `closed`
   * input for peer, also when no connection was open: quarantined pages wait for it.
   */
  | { readonly kind: 'closePeer'; readonly peer: PeerId; readonly reason: string };

export interface Machine<Input, Effect> {
  handle(nowMs: number, input: Input): Effect[];
  /** The earliest time a tick has work to do, or undefined when no wait is pending. */
  wakeAtMs(): number | undefined;
}

/**
 * Every wait's limit, in ms. Defaults suit a real deployment on a LAN; tests pass small ones.
 * Only the waits on a peer have limits: local compute is bounded by the router's prefill limit.
 */
export interface Timeouts {
  /** Router: Reserve sent -> Reserved or Rejected. */
  readonly reserveMs: number;
  /** Router: Prefill sent -> the first Tokens (prefill admission, compute and transfer). */
  readonly prefillMs: number;
  /** Router: between two Tokens messages, and the last one to Finished. */
  readonly tokenMs: number;
  /** Router: Abort sent -> decode's AbortAck. */
  readonly cancelMs: number;
  /** Decode: Reserved -> the first KvChunk (or KvDone). */
  readonly kvStartMs: number;
  /** Decode: one KvChunk -> the next one, or KvDone. */
  readonly frameMs: number;
  /** Decode: Abort sent to the writer -> its AbortAck; retried abortRetries times, then the writer is declared dead. */
  readonly abortAckMs: number;
  readonly abortRetries: number;
  /** Prefill: KvDone sent -> Ack. */
  readonly ackMs: number;
  /** How long an ended request is remembered, so late or repeated messages for it are dropped. */
  readonly tombstoneMs: number;
}

export const DEFAULT_TIMEOUTS: Timeouts = {
  reserveMs: 10_000,
  prefillMs: 600_000,
  tokenMs: 60_000,
  cancelMs: 10_000,
  kvStartMs: 600_000,
  frameMs: 30_000,
  abortAckMs: 5_000,
  abortRetries: 3,
  ackMs: 30_000,
  tombstoneMs: 600_000,
};

/** One pending wait of a request: when it expires and what it waited for (for the TimeoutError). */
export interface Deadline {
  readonly atMs: number;
  readonly waitingFor: string;
  readonly timeoutMs: number;
}

export function deadline(nowMs: number, timeoutMs: number, waitingFor: string): Deadline {
  return { atMs: nowMs + timeoutMs, waitingFor, timeoutMs };
}

/**
 * The earliest `wait` among a machine's records, or undefined. Walks them in place (no array is
 * built): drivers ask after every input, and a decode node's inputs come by the thousand per GiB.
 */
export function earliest(records: Iterable<{ readonly wait: Deadline | undefined }>): number | undefined {
  let at: number | undefined;
  for (const { wait } of records) if (wait !== undefined && (at === undefined || wait.atMs < at)) at = wait.atMs;
  return at;
}

/** Builds the effect list of one handle() call, tracing each send as it is queued. */
export class Outbox<Effect extends { readonly kind: string }> {
  readonly effects: (Effect | NetworkEffect)[] = [];
  readonly #tracer: Tracer;

  constructor(tracer: Tracer) {
    this.#tracer = tracer;
  }

  send(to: PeerId, message: Message): void {
    this.#tracer.send(message.rid, message.type, to);
    this.effects.push({ kind: 'send', to, message });
  }

  push(effect: Effect | NetworkEffect): void {
    this.effects.push(effect);
  }
}

/** What a machine keeps of one live request: its id, its state, and its pending wait. */
export interface BookRecord<State extends string> {
  readonly rid: RequestId;
  state: State;
  wait: Deadline | undefined;
}

/** What a machine remembers of an ended request (its final state), until expiresAtMs. */
export interface BookTombstone<State extends string> {
  readonly state: State;
  readonly expiresAtMs: number;
}

/**
 * The skeleton the three machines share: their live requests, the tombstones of ended ones, the
 * time of the input being handled, and the moves each makes the same way (a traced state change,
 * an end that leaves a tombstone, the earliest wait, a request's state). Each machine keeps its
 * own record and tombstone types, and its own protocol; this owns none of it.
 */
export class RequestBook<R extends BookRecord<string>, T extends BookTombstone<string>> {
  readonly active = new Map<RequestId, R>();
  readonly ended = new Tombstones<T>();
  /** The time of the input being handled (handle()'s nowMs). */
  now = 0;
  readonly #tracer: Tracer;
  readonly #tombstoneMs: number;

  constructor(tracer: Tracer, tombstoneMs: number) {
    this.#tracer = tracer;
    this.#tombstoneMs = tombstoneMs;
  }

  /** An input arrives at nowMs: the clock moves, expired tombstones are forgotten. */
  begin(nowMs: number): void {
    this.now = nowMs;
    this.ended.sweep(nowMs);
  }

  /** The earliest pending wait of a live request (Machine.wakeAtMs). */
  wakeAtMs(): number | undefined {
    return earliest(this.active.values());
  }

  /** rid's state here: live, ended (while its tombstone lasts), or 'Idle' when never heard of. */
  stateOf(rid: RequestId): R['state'] | T['state'] | 'Idle' {
    return this.active.get(rid)?.state ?? this.ended.get(rid)?.state ?? 'Idle';
  }

  /** r moves to `to` (traced); a move to the state it is in is no move. */
  goto(r: R, to: R['state']): void {
    if (r.state === to) return;
    this.#tracer.state(r.rid, r.state, to);
    r.state = to;
  }

  /** r ends: it leaves the live requests, and its tombstone (final state and what else T holds) is set. */
  end(r: R, tombstone: Omit<T, 'expiresAtMs'>): void {
    this.active.delete(r.rid);
    this.bury(r.rid, r.state, tombstone);
  }

  /** rid ends from state `from` (a live request's, or 'Idle' for one that never started here). */
  bury(rid: RequestId, from: string, tombstone: Omit<T, 'expiresAtMs'>): void {
    this.#tracer.state(rid, from, tombstone.state);
    this.ended.set(rid, { ...tombstone, expiresAtMs: this.now + this.#tombstoneMs } as T);
  }
}

/** Counts one abort in the state it came in (the machines' abortsByState statistics). */
export function countByState(counts: Record<string, number>, state: string): void {
  counts[state] = (counts[state] ?? 0) + 1;
}

/** What every machine is built with; each machine's options add its own. */
export interface MachineOptions {
  /** This node's id in traces (decode's is also its advertised data address). */
  readonly node: PeerId;
  readonly timeouts?: Partial<Timeouts>;
  readonly faults?: FaultSet;
  readonly trace?: TraceSink;
}

/**
 * The skeleton the three machines extend: their options, tracer and RequestBook, one handle()
 * (the clock moves, tombstones are swept, a fresh Outbox collects the effects, `dispatch` acts),
 * wakeAtMs, stateOf, numActive, and the moves they make alike: a traced state change, an end, a
 * deadline from now, an acknowledged abort. A machine adds only its own protocol (`dispatch`).
 */
export abstract class ProtocolMachine<
  R extends BookRecord<string>,
  T extends BookTombstone<string>,
  Input,
  Effect extends { readonly kind: string },
> implements Machine<Input, Effect> {
  readonly node: PeerId;
  protected readonly timeouts: Timeouts;
  protected readonly faults: FaultSet;
  protected readonly tracer: Tracer;
  protected readonly book: RequestBook<R, T>;
  /** The effects of the input being handled. */
  protected out: Outbox<Effect>;

  constructor(role: Role, options: MachineOptions) {
    this.node = options.node;
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
    this.faults = options.faults ?? NO_FAULTS;
    this.tracer = new Tracer(options.trace ?? NO_TRACE, options.node, role);
    this.book = new RequestBook(this.tracer, this.timeouts.tombstoneMs);
    this.out = new Outbox<Effect>(this.tracer);
  }

  handle(nowMs: number, input: Input): Effect[] {
    this.book.begin(nowMs);
    this.out = new Outbox<Effect>(this.tracer);
    this.dispatch(input);
    return this.out.effects as Effect[];
  }

  /** The machine's own protocol: act on one input, queueing effects on `out`. */
  protected abstract dispatch(input: Input): void;

  wakeAtMs(): number | undefined {
    return this.book.wakeAtMs();
  }

  /** rid's state here: 'Idle' when this node never heard of it (or forgot its tombstone). */
  stateOf(rid: RequestId): R['state'] | T['state'] | 'Idle' {
    return this.book.stateOf(rid);
  }

  /** Live requests (router: attempts) on this node. */
  get numActive(): number {
    return this.book.active.size;
  }

  /** The time of the input being handled. */
  protected get now(): number {
    return this.book.now;
  }

  /** A wait of timeoutMs from now (a record's `wait`). */
  protected waitFor(timeoutMs: number, waitingFor: string): Deadline {
    return deadline(this.book.now, timeoutMs, waitingFor);
  }

  /** Answers an Abort with AbortAck (prefill and decode); fault drop-abort-ack is the negative control. */
  protected ackAbort(to: PeerId, rid: RequestId): void {
    if (this.faults.has('drop-abort-ack')) return;
    this.out.send(to, { type: 'AbortAck', rid });
  }
}
