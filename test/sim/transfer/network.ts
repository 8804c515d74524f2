// The simulated cluster network: one connection per node pair, created by the side that dials
// (router -> workers, prefill -> decode; decode never dials), FIFO per direction like TCP.
// What a real deployment can do, and so what this network does in every run:
//   - delay messages (random latency; FIFO within a direction of one connection);
//   - break a connection (reset, or closePeer): everything in flight on it is lost in both
//     directions, each end learns of the close after its own delay, and sends from an end that
//     has not learnt it yet vanish; a later send re-dials a new connection;
//   - crash a node: all its connections break, it handles nothing more.
// What TCP never does, but a hostile run ("chaos": a third of the seeds) adds to test that the
// machines stay safe anyway: drop, duplicate and reorder single messages within a connection.
// Messages are encoded and decoded with the real codec on the way.
import type { Rng } from '../../../src/core/index.js';
import { decodeFrame, encodeFrame, type Message, type PeerId } from '../../../src/transfer/index.js';
import { EventQueue } from './event-queue.js';

export type Role = 'router' | 'prefill' | 'decode';

export interface NetworkConfig {
  readonly chaos: boolean;
  readonly dropP: number;
  readonly dupP: number;
  readonly reorderP: number;
  readonly maxLatencyMs: number;
}

export type NetEvent =
  | {
      readonly kind: 'deliver';
      readonly channel: Channel;
      readonly to: PeerId;
      readonly from: PeerId;
      readonly message: Message;
      readonly inflightKey: string | undefined;
    }
  | {
      readonly kind: 'closed';
      readonly node: PeerId;
      readonly peer: PeerId;
      readonly channel: Channel;
      readonly reason: string;
    }
  | { readonly kind: 'connected'; readonly node: PeerId; readonly peer: PeerId; readonly channel: Channel };

export interface Channel {
  readonly id: number;
  readonly a: PeerId;
  readonly b: PeerId;
  open: boolean;
  /** Ends that have handled this channel's close (their later sends go to a new channel). */
  readonly noticed: Set<PeerId>;
  /** Last delivery time per direction, for FIFO. */
  readonly lastAt: Map<PeerId, number>;
  /** In-flight KvChunk keys on this channel (decode node|page|epoch), to undo when it breaks. */
  readonly inflight: string[];
}

export interface FaultCounts {
  [kind: string]: number;
}

export class SimNetwork {
  readonly #rng: Rng;
  readonly #queue: EventQueue<NetEvent | unknown>;
  readonly #config: NetworkConfig;
  readonly #roles: ReadonlyMap<PeerId, Role>;
  readonly #crashed = new Set<PeerId>();
  readonly #channels = new Map<string, Channel>();
  /** KvChunks in flight per (decode node, page, epoch): "a write to it may be in flight". */
  readonly inflight = new Map<string, number>();
  readonly faults: FaultCounts;
  #nextId = 1;
  tamper: ((message: Message, to: PeerId) => Message) | undefined;

  constructor(
    rng: Rng,
    queue: EventQueue<NetEvent | unknown>,
    config: NetworkConfig,
    roles: ReadonlyMap<PeerId, Role>,
    faults: FaultCounts,
  ) {
    this.#rng = rng;
    this.#queue = queue;
    this.#config = config;
    this.#roles = roles;
    this.faults = faults;
  }

  isCrashed(node: PeerId): boolean {
    return this.#crashed.has(node);
  }

  #count(kind: string): void {
    this.faults[kind] = (this.faults[kind] ?? 0) + 1;
  }

  #mayDial(from: PeerId, to: PeerId): boolean {
    const a = this.#roles.get(from);
    const b = this.#roles.get(to);
    return (a === 'router' && b !== 'router') || (a === 'prefill' && b === 'decode');
  }

  #key(x: PeerId, y: PeerId): string {
    return x < y ? `${x}|${y}` : `${y}|${x}`;
  }

  #latency(): number {
    return 0.05 + this.#rng.nextFloat() * this.#config.maxLatencyMs;
  }

  send(now: number, from: PeerId, to: PeerId, message: Message): void {
    if (this.#crashed.has(from)) return;
    let ch = this.#channels.get(this.#key(from, to));
    if (ch !== undefined && !ch.open && !ch.noticed.has(from)) return; // broken; the sender has not learnt it yet
    if (ch === undefined || !ch.open) {
      if (!this.#mayDial(from, to)) return; // no connection and not ours to dial: nothing to send on
      ch = this.#dial(now, from, to);
      if (ch === undefined) return;
    }
    const wire = this.tamper === undefined ? message : this.tamper(message, to);
    const copy = decodeFrame(encodeFrame(wire)); // the real codec, and no shared buffers
    const key =
      copy.type === 'KvChunk' && this.#roles.get(to) === 'decode'
        ? `${to}|${copy.tag.page}|${copy.tag.epoch}`
        : undefined;
    const copies =
      this.#config.chaos && this.#rng.chance(this.#config.dropP)
        ? (this.#count('drop'), 0)
        : this.#config.chaos && this.#rng.chance(this.#config.dupP)
          ? (this.#count('duplicate'), 2)
          : 1;
    for (let i = 0; i < copies; i++) {
      let at = now + this.#latency();
      if (this.#config.chaos && this.#rng.chance(this.#config.reorderP)) {
        this.#count('reorder');
        at += this.#rng.nextFloat() * 5 * this.#config.maxLatencyMs;
      } else {
        at = Math.max(at, ch.lastAt.get(from) ?? 0);
        ch.lastAt.set(from, at);
      }
      if (key !== undefined) {
        this.inflight.set(key, (this.inflight.get(key) ?? 0) + 1);
        ch.inflight.push(key);
      }
      this.#queue.push(at, { kind: 'deliver', channel: ch, to, from, message: copy, inflightKey: key });
    }
  }

  #dial(now: number, from: PeerId, to: PeerId): Channel | undefined {
    const old = this.#channels.get(this.#key(from, to));
    if (old !== undefined) {
      // The acceptor learns of the old connection's end before it sees the new one.
      for (const end of [old.a, old.b])
        if (!old.noticed.has(end))
          this.#queue.push(now, {
            kind: 'closed',
            node: end,
            peer: end === old.a ? old.b : old.a,
            channel: old,
            reason: 'replaced by a new connection',
          });
    }
    const ch: Channel = {
      id: this.#nextId++,
      a: from,
      b: to,
      open: true,
      noticed: new Set(),
      lastAt: new Map(),
      inflight: [],
    };
    this.#channels.set(this.#key(from, to), ch);
    if (this.#crashed.has(to)) {
      this.#break(now, ch, 'connection refused');
      return undefined;
    }
    const at = now + this.#latency();
    this.#queue.push(at, { kind: 'connected', node: to, peer: from, channel: ch });
    ch.lastAt.set(from, at);
    return ch;
  }

  /** The event was popped: is it still deliverable? Updates in-flight counts. */
  accept(event: NetEvent): boolean {
    if (event.kind !== 'deliver')
      return event.kind === 'closed' ? !event.channel.noticed.has(event.node) : event.channel.open;
    if (!event.channel.open) return false;
    if (event.inflightKey !== undefined) {
      this.inflight.set(event.inflightKey, (this.inflight.get(event.inflightKey) ?? 1) - 1);
      const i = event.channel.inflight.indexOf(event.inflightKey);
      if (i >= 0) event.channel.inflight.splice(i, 1);
    }
    return !this.#crashed.has(event.to);
  }

  noticeClosed(event: Extract<NetEvent, { kind: 'closed' }>): void {
    event.channel.noticed.add(event.node);
  }

  /** Breaks a connection: in-flight messages are lost; each live end hears of it after its own delay. */
  #break(now: number, ch: Channel, reason: string, promptly?: PeerId): void {
    if (!ch.open) return;
    ch.open = false;
    for (const key of ch.inflight) this.inflight.set(key, (this.inflight.get(key) ?? 1) - 1);
    ch.inflight.length = 0;
    for (const [end, peer] of [
      [ch.a, ch.b],
      [ch.b, ch.a],
    ] as const) {
      if (this.#crashed.has(end)) {
        ch.noticed.add(end);
        continue;
      }
      this.#queue.push(end === promptly ? now : now + this.#latency() * 3, {
        kind: 'closed',
        node: end,
        peer,
        channel: ch,
        reason,
      });
    }
  }

  /** closePeer: `node` closes its connection to peer (it hears of it at once). No connection: it still hears. */
  closePeer(now: number, node: PeerId, peer: PeerId, reason: string): void {
    const ch = this.#channels.get(this.#key(node, peer));
    if (ch !== undefined && ch.open) return this.#break(now, ch, reason, node);
    const dead: Channel = {
      id: this.#nextId++,
      a: node,
      b: peer,
      open: false,
      noticed: new Set(),
      lastAt: new Map(),
      inflight: [],
    };
    this.#queue.push(now, { kind: 'closed', node, peer, channel: dead, reason });
  }

  reset(now: number): boolean {
    const open = [...this.#channels.values()].filter((c) => c.open);
    if (open.length === 0) return false;
    this.#count('reset');
    this.#break(now, this.#rng.pick(open), 'connection reset');
    return true;
  }

  crash(now: number, node: PeerId): void {
    this.#count(`crash-${this.#roles.get(node)}`);
    this.#crashed.add(node);
    for (const ch of this.#channels.values())
      if (ch.a === node || ch.b === node) this.#break(now, ch, `${node} crashed`);
  }

  /** A KvChunk to (decode node, page, epoch) is on an open connection. */
  writeInFlight(node: PeerId, page: number, epoch: number): boolean {
    return (this.inflight.get(`${node}|${page}|${epoch}`) ?? 0) > 0;
  }
}
