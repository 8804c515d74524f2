// Protocol events, as the transfer state machines emit them. Simulation and end-to-end runs
// record them (JSON lines); the conformance checker (spec/conformance) replays them against the
// model's guards, so a trace the real code produced but the model forbids fails a test.
//
// Names are the spec's names: `message` is a Message['type'], `state` a state name from the
// role's state machine, page actions the ledger's verbs.
//
// Who emits what: the machines emit send/recv/drop/state/outcome/close, and decode's page events
// up to the hand-over (allocate, write, stamp, quarantine, free, release). After startDecoding
// the pages are the decoder's: the worker emits their `read` (each decode step) and `free`
// (request ended or stopDecoding) events with the same sink. Prefill emits no page events (its
// pages are the scheduler's, as in the model). A trace says which prefill writes a request only
// once it speaks; the router's Reserve names it (the conformance checker's `writerOf`).
// `Tracer` is the thin emitter the machines (and the decode worker's page events) use.

import type { MessageType } from './messages.js';

export type Role = 'router' | 'prefill' | 'decode';

export type PageAction = 'allocate' | 'write' | 'stamp' | 'read' | 'free' | 'quarantine' | 'release';

export type TraceEvent =
  /** `node` put `message` on the wire to `peer`. */
  | {
      readonly kind: 'send';
      readonly node: string;
      readonly role: Role;
      readonly rid: string;
      readonly message: MessageType;
      readonly peer: string;
    }
  /** `node` took `message` from `peer` off the wire (before deciding to accept or drop it). */
  | {
      readonly kind: 'recv';
      readonly node: string;
      readonly role: Role;
      readonly rid: string;
      readonly message: MessageType;
      readonly peer: string;
    }
  /** `node` dropped a received message; `why` says which check refused it. */
  | {
      readonly kind: 'drop';
      readonly node: string;
      readonly role: Role;
      readonly rid: string;
      readonly message: MessageType;
      readonly why: string;
    }
  /** The per-request state machine on `node` moved from `from` to `to`. */
  | {
      readonly kind: 'state';
      readonly node: string;
      readonly role: Role;
      readonly rid: string;
      readonly from: string;
      readonly to: string;
    }
  /** A ledger or data-plane action on pages of `node`, each page with the epoch involved. */
  | {
      readonly kind: 'page';
      readonly node: string;
      readonly role: Role;
      readonly rid: string;
      readonly action: PageAction;
      readonly pages: readonly { page: number; epoch: number }[];
    }
  /** The peer connection between `node` and `peer` closed (crash, reset, shutdown). */
  | { readonly kind: 'close'; readonly node: string; readonly role: Role; readonly peer: string }
  /** What the client was finally told for rid: success (HTTP 200 with tokens) or an error code. */
  | {
      readonly kind: 'outcome';
      readonly node: string;
      readonly role: Role;
      readonly rid: string;
      readonly outcome: 'success' | 'error';
      readonly code?: string;
    };

/** Where state machines put their events; a no-op sink in production unless tracing is on. */
export interface TraceSink {
  emit(event: TraceEvent): void;
}

export const NO_TRACE: TraceSink = { emit() {} };

/** Emits TraceEvents for one node and role; a thin layer so the machines read as protocol. */
export class Tracer {
  readonly #sink: TraceSink;
  readonly #node: string;
  readonly #role: Role;

  constructor(sink: TraceSink, node: string, role: Role) {
    this.#sink = sink;
    this.#node = node;
    this.#role = role;
  }

  #emit(event: TraceEvent): void {
    this.#sink.emit(event);
  }

  send(rid: string, message: MessageType, peer: string): void {
    this.#emit({ kind: 'send', node: this.#node, role: this.#role, rid, message, peer });
  }

  recv(rid: string, message: MessageType, peer: string): void {
    this.#emit({ kind: 'recv', node: this.#node, role: this.#role, rid, message, peer });
  }

  drop(rid: string, message: MessageType, why: string): void {
    this.#emit({ kind: 'drop', node: this.#node, role: this.#role, rid, message, why });
  }

  state(rid: string, from: string, to: string): void {
    this.#emit({ kind: 'state', node: this.#node, role: this.#role, rid, from, to });
  }

  page(rid: string, action: PageAction, pages: readonly { page: number; epoch: number }[]): void {
    if (pages.length === 0) return;
    this.#emit({
      kind: 'page',
      node: this.#node,
      role: this.#role,
      rid,
      action,
      pages: pages.map((t) => ({ page: t.page, epoch: t.epoch })),
    });
  }

  close(peer: string): void {
    this.#emit({ kind: 'close', node: this.#node, role: this.#role, peer });
  }

  outcome(rid: string, outcome: 'success' | 'error', code?: string): void {
    this.#emit(
      code === undefined
        ? { kind: 'outcome', node: this.#node, role: this.#role, rid, outcome }
        : { kind: 'outcome', node: this.#node, role: this.#role, rid, outcome, code },
    );
  }
}
