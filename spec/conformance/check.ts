// The conformance checker: replays a trace of TraceEvents (src/transfer/trace.ts) from the real
// code — or from the model itself, see model-trace.ts — against the guards of the Promela model
// (spec/tessera.pml), event by event, and says at which event a trace leaves what the model
// allows. Owns: a mirror of each node's per-request states and page ledger, built from the
// trace alone. Must never: read clocks, files or the network; accept a trace the model forbids
// on the properties (a)-(c) below, whatever order the code emits one step's events in.
//
// Sections follow tessera.pml, and the rules carry its names:
//   messages  recv only what was sent; each role sends only in the states the model sends from
//   states    every change is an edge of R_EDGE / P_EDGE / D_EDGE (tables.ts); decode enters
//             Decoding only after KvDone and a passing d_page_check; success needs Finished
//   pages     the ledger of every node: allocate a free page with a new epoch; write and stamp
//             only a page held for rid in that epoch (c); d_read only pages written for rid in
//             the current epoch (a); free / release a decode page only once its writer can no
//             longer write (Decoding reached, the writer's AbortAck, or its connection closed) (c)
//   outcome   one per request; success only if no node decided the request fails (b)
//
// What it cannot see, and leaves to the model: writes in flight (a trace shows no completions),
// pool sizes (admission), and the order of events across processes (merge per-node traces so
// that every recv follows its send, or pass { requireSendBeforeRecv: false }).
import type { Role, TraceEvent } from '../../src/transfer/index.js';
import { DOOMING, isEdge, SENDS, STATES, type PageState } from './tables.js';

export type CheckResult = { readonly ok: true } | { readonly ok: false; readonly index: number; readonly event: TraceEvent; readonly reason: string };

export interface CheckOptions {
  /** Every recv must follow a send of that message for rid from that peer (default true). */
  readonly requireSendBeforeRecv?: boolean;
  /**
   * The trace is a whole run: at its end every request has ended on every node and every
   * decode page is free again, except on nodes whose peer connection closed (default false).
   */
  readonly complete?: boolean;
  /**
   * The prefill node that writes rid's pages (the router picks the pair before Reserve, and
   * Reserve names it, but no trace event carries it). Without it the checker learns the writer
   * from the router's Prefill, the writer's messages to decode, or decode's Abort to it, and
   * refuses a release it cannot attribute.
   */
  readonly writerOf?: (rid: string) => string | undefined;
}

interface Page {
  state: PageState;
  epoch: number;
  owner: string | undefined;
  /** The epoch the page's stamp carries (0: never stamped). Pages are never zeroed. */
  stamp: number;
}

interface Tag {
  readonly page: number;
  readonly epoch: number;
}

/**
 * Entering these states means some node decided the request fails (the model's `doom`).
 * Prefill's AwaitingAck -> Aborted is not one: its KV has been sent, and in the model it
 * follows an abort that dooms the request elsewhere (in the code also a closed connection).
 */
function dooms(role: Role, from: string, to: string): boolean {
  return (DOOMING[role] as readonly string[]).includes(to) && !(role === 'prefill' && from === 'AwaitingAck');
}

/** Thrown inside the checker to stop at the offending event. */
class Violation extends Error {}

function violate(reason: string): never {
  throw new Violation(reason);
}

export function checkTrace(events: readonly TraceEvent[], options: CheckOptions = {}): CheckResult {
  const m = new ModelMirror(options);
  for (let index = 0; index < events.length; index++) {
    const event = events[index] as TraceEvent;
    try {
      m.step(event);
    } catch (e) {
      if (e instanceof Violation) return { ok: false, index, event, reason: e.message };
      throw e;
    }
  }
  if (options.complete === true) {
    const reason = m.unfinished();
    if (reason !== undefined) {
      const last = events.length - 1;
      return { ok: false, index: last, event: events[last] as TraceEvent, reason };
    }
  }
  return { ok: true };
}

/** What the model knows, rebuilt from the trace. Keys: `${node}/${rid}` unless named otherwise. */
class ModelMirror {
  readonly #requireSendBeforeRecv: boolean;
  readonly #writerOf: (rid: string) => string | undefined;
  readonly #roleOf = new Map<string, Role>(); // node -> role
  readonly #state = new Map<string, string>();
  readonly #ledger = new Map<string, Map<number, Page>>(); // node -> page -> record
  readonly #table = new Map<string, Tag[]>(); // decode node/rid -> its page table (the tags)
  readonly #sent = new Map<string, number>(); // `${from}>${to}/${rid}/${message}` -> count
  readonly #received = new Set<string>(); // `${node}/${rid}/${message}`
  readonly #writer = new Map<string, string>(); // rid -> the prefill node that writes its pages
  readonly #writerAcked = new Set<string>(); // decode node/rid: AbortAck from the writer received
  readonly #decodingReached = new Set<string>(); // decode node/rid
  readonly #closed = new Set<string>(); // `${node}|${peer}`
  readonly #doom = new Set<string>(); // rid: some node decided it fails
  readonly #outcome = new Map<string, string>(); // rid -> success | error

  constructor(options: CheckOptions) {
    this.#requireSendBeforeRecv = options.requireSendBeforeRecv ?? true;
    this.#writerOf = options.writerOf ?? (() => undefined);
  }

  step(e: TraceEvent): void {
    const known = this.#roleOf.get(e.node);
    if (known !== undefined && known !== e.role) violate(`node ${e.node} acts as ${e.role}, but earlier as ${known}`);
    this.#roleOf.set(e.node, e.role);
    switch (e.kind) {
      case 'send':
        return this.#send(e.node, e.role, e.rid, e.message, e.peer);
      case 'recv':
        return this.#recv(e.node, e.role, e.rid, e.message, e.peer);
      case 'drop':
        return;
      case 'state':
        return this.#goto(e.node, e.role, e.rid, e.from, e.to);
      case 'page':
        for (const tag of e.pages) this.#page(e.node, e.role, e.rid, e.action, tag);
        return;
      case 'close':
        this.#closed.add(`${e.node}|${e.peer}`);
        return;
      case 'outcome':
        return this.#decide(e.node, e.rid, e.outcome);
    }
  }

  // ------------------------------------------------------------------------------ messages

  #send(node: string, role: Role, rid: string, message: string, peer: string): void {
    const allowed = (SENDS[role] as Partial<Record<string, readonly string[]>>)[message];
    if (allowed === undefined) violate(`the model's ${role} never sends ${message}`);
    const state = this.#stateOf(node, rid);
    if (!allowed.includes(state)) violate(`${role} ${node} sends ${message} for ${rid} in state ${state}; the model sends it only in ${allowed.join(', ')}`);
    const key = `${node}>${peer}/${rid}/${message}`;
    this.#sent.set(key, (this.#sent.get(key) ?? 0) + 1);
    if ((role === 'router' && message === 'Prefill') || (role === 'decode' && message === 'Abort')) this.#learnWriter(rid, peer);
  }

  #recv(node: string, role: Role, rid: string, message: string, peer: string): void {
    if (this.#requireSendBeforeRecv && !this.#sent.has(`${peer}>${node}/${rid}/${message}`)) {
      violate(`${node} receives ${message} for ${rid} from ${peer}, which never sent it`);
    }
    this.#received.add(`${node}/${rid}/${message}`);
    if (role === 'decode' && (message === 'KvChunk' || message === 'KvDone' || message === 'AbortAck')) {
      // Only rid's writer sends these to decode (another peer's would be dropped).
      if (!this.#writer.has(rid)) this.#learnWriter(rid, peer);
      if (message === 'AbortAck' && (this.#writer.get(rid) ?? this.#writerOf(rid)) === peer) this.#writerAcked.add(`${node}/${rid}`);
    }
  }

  #learnWriter(rid: string, peer: string): void {
    const known = this.#writer.get(rid) ?? this.#writerOf(rid);
    if (known !== undefined && known !== peer) violate(`${rid} has two writers: ${known} and ${peer}`);
    this.#writer.set(rid, peer);
  }

  // ------------------------------------------------------------------------------ states

  #stateOf(node: string, rid: string): string {
    return this.#state.get(`${node}/${rid}`) ?? 'Idle';
  }

  #goto(node: string, role: Role, rid: string, from: string, to: string): void {
    const key = `${node}/${rid}`;
    const now = this.#stateOf(node, rid);
    if (!(STATES[role] as readonly string[]).includes(to)) violate(`${to} is not a ${role} state of the model`);
    if (from !== now) violate(`${role} ${node} moves ${rid} from ${from}, but it is in ${now}`);
    if (!isEdge(role, from, to)) violate(`${role} ${from} -> ${to} is not an edge of the model`);
    if (role === 'decode' && to === 'Decoding') {
      if (!this.#received.has(`${node}/${rid}/KvDone`)) violate(`decode ${node} starts ${rid} without KvDone`);
      const failure = this.#pageCheck(node, rid);
      if (failure !== undefined) violate(`decode ${node} starts ${rid} without full coverage: ${failure}`);
      this.#decodingReached.add(key);
    }
    if (role === 'decode' && to === 'Released' && (from === 'AwaitingKv' || from === 'Receiving' || from === 'Aborting')) {
      this.#requireWriterDone(node, rid, `decode ${node} releases ${rid} (${from} -> Released)`);
    }
    if (role === 'router' && to === 'Succeeded' && !this.#received.has(`${node}/${rid}/Finished`)) {
      violate(`router ${node} ends ${rid} Succeeded without Finished`);
    }
    if (dooms(role, from, to)) this.#doom.add(rid);
    this.#state.set(key, to);
  }

  /** The model's WRITER_DONE, from what decode can know: the writer acked, or its connection closed. */
  #requireWriterDone(node: string, rid: string, what: string): void {
    if (this.#decodingReached.has(`${node}/${rid}`) || this.#writerAcked.has(`${node}/${rid}`)) return;
    const writer = this.#writer.get(rid) ?? this.#writerOf(rid);
    if (writer === undefined) violate(`${what}, but the trace does not say which prefill writes ${rid} (pass writerOf)`);
    if (this.#closed.has(`${node}|${writer}`)) return;
    violate(`${what} while its writer ${writer} may still write: no AbortAck from it, no close of its connection`);
  }

  // ------------------------------------------------------------------------------ pages

  #pageOf(node: string, page: number): Page {
    let pages = this.#ledger.get(node);
    if (pages === undefined) this.#ledger.set(node, (pages = new Map()));
    let p = pages.get(page);
    if (p === undefined) pages.set(page, (p = { state: 'free', epoch: 0, owner: undefined, stamp: 0 }));
    return p;
  }

  #page(node: string, role: Role, rid: string, action: string, tag: Tag): void {
    const p = this.#pageOf(node, tag.page);
    const at = `page ${tag.page}@${tag.epoch} of ${node}`;
    const held = (states: readonly PageState[]): void => {
      if (!states.includes(p.state) || p.owner !== rid || p.epoch !== tag.epoch) {
        violate(`${action} of ${at} for ${rid}, but the ledger has it ${p.state} for ${p.owner ?? 'nobody'} in epoch ${p.epoch}`);
      }
    };
    switch (action) {
      case 'allocate': // d_allocate: a free page, a new epoch
        if (p.state !== 'free') violate(`allocate of ${at} for ${rid}, but it is ${p.state} for ${p.owner}`);
        if (tag.epoch <= p.epoch) violate(`allocate of ${at} for ${rid} reuses epoch ${tag.epoch} (last ${p.epoch}): epochs are bumped at every allocation`);
        Object.assign(p, { state: 'allocated', epoch: tag.epoch, owner: rid });
        if (role === 'decode') this.#tableOf(node, rid).push(tag);
        return;
      case 'write': // land: (c) only into a page held for rid in that epoch
        return held(['allocated', 'quarantined']);
      case 'stamp':
        held(['allocated', 'quarantined']);
        p.stamp = tag.epoch;
        return;
      case 'read': // d_read: (a) written for rid in the current epoch, by a decode step
        held(['allocated']);
        if (role === 'decode' && this.#stateOf(node, rid) !== 'Decoding') violate(`read of ${at} for ${rid} in state ${this.#stateOf(node, rid)}: decode steps run in Decoding`);
        if (role === 'decode' && p.stamp !== tag.epoch) violate(`read of ${at} for ${rid}, whose stamp says epoch ${p.stamp}: not written for ${rid} in this epoch`);
        return;
      case 'quarantine':
        held(['allocated']);
        p.state = 'quarantined';
        return;
      case 'release': // d_release: (c)
        held(['quarantined']);
        if (role === 'decode') this.#requireWriterDone(node, rid, `release of ${at}`);
        Object.assign(p, { state: 'free', owner: undefined });
        return;
      case 'free': // d_free: (c)
        held(['allocated']);
        if (role === 'decode') this.#requireWriterDone(node, rid, `free of ${at}`);
        Object.assign(p, { state: 'free', owner: undefined });
        return;
      default:
        violate(`${action} is not a page action of the model`);
    }
  }

  #tableOf(node: string, rid: string): Tag[] {
    const key = `${node}/${rid}`;
    let t = this.#table.get(key);
    if (t === undefined) this.#table.set(key, (t = []));
    return t;
  }

  /** d_page_check: every page of rid's table held for it in its epoch and stamped in that epoch. */
  #pageCheck(node: string, rid: string): string | undefined {
    const table = this.#table.get(`${node}/${rid}`);
    if (table === undefined || table.length === 0) return `${rid} has no pages on ${node}`;
    for (const tag of table) {
      const p = this.#pageOf(node, tag.page);
      if (p.state !== 'allocated' || p.owner !== rid || p.epoch !== tag.epoch) return `page ${tag.page}@${tag.epoch} is ${p.state} for ${p.owner ?? 'nobody'} in epoch ${p.epoch}`;
      if (p.stamp !== tag.epoch) return `page ${tag.page}@${tag.epoch} carries a stamp of epoch ${p.stamp}`;
    }
    return undefined;
  }

  // ------------------------------------------------------------------------------ outcome

  /** r_decide: (b) never success after a failure decision; once per request. */
  #decide(node: string, rid: string, outcome: 'success' | 'error'): void {
    const before = this.#outcome.get(rid);
    if (before !== undefined) violate(`a second outcome (${outcome}) for ${rid}, after ${before}`);
    if (outcome === 'success') {
      if (this.#doom.has(rid)) violate(`success reported for ${rid}, which a node had already failed, rejected or aborted`);
      const state = this.#stateOf(node, rid);
      if (state !== 'Succeeded') violate(`success reported for ${rid} while the router has it ${state}, not Succeeded`);
    }
    this.#outcome.set(rid, outcome);
  }

  // ------------------------------------------------------------------------------ the end

  /** With { complete: true }: the model's ALL_DONE, on the nodes that are still up. */
  unfinished(): string | undefined {
    const lost = new Set([...this.#closed].map((k) => k.split('|')[1]));
    for (const [key, state] of this.#state) {
      const node = key.slice(0, key.indexOf('/'));
      const role = this.#roleOf.get(node) as Role;
      if (lost.has(node)) continue;
      const ended = role === 'router' ? ['Succeeded', 'Failed'] : role === 'prefill' ? ['Released', 'Aborted'] : ['Finished', 'Released'];
      if (!ended.includes(state)) return `the trace ends with ${key} in ${state}`;
    }
    for (const [node, pages] of this.#ledger) {
      if (this.#roleOf.get(node) !== 'decode') continue;
      for (const [page, p] of pages) if (p.state !== 'free') return `the trace ends with page ${page} of ${node} ${p.state} for ${p.owner}`;
    }
    return undefined;
  }
}
