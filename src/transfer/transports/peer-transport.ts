// The transport logic both transports share: one connection per peer, dial or accept, the
// events handed to the node. TCP and memory differ only in how a Pipe is made.
// Owns: the peer -> connection table, dialing, replacing a stale accepted connection.
// Must never: call a handler re-entrantly from send()/closePeer(), report `closed` for a
// connection that never authenticated and was not ours to dial, or keep two connections to one peer.
import { randomBytes } from 'node:crypto';
import { NO_FAULTS, type FaultSet } from '../../core/index.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../codec.js';
import type { PeerId } from '../machine.js';
import type { Message } from '../messages.js';
import { NONCE_BYTES, checkSecret } from '../auth.js';
import { Connection } from './connection.js';
import type { Pipe } from './pipe.js';
import { RefusalLog } from './refusal-log.js';
import type { Transport, TransportOptions, TransportStats } from './types.js';

export const DEFAULT_MAX_UNAUTHENTICATED = 256;
export const DEFAULT_MAX_UNAUTHENTICATED_PER_SOURCE = 32;

export class PeerTransport implements Transport {
  readonly nodeId: PeerId;
  readonly #options: TransportOptions;
  readonly #dialPipe: ((peer: PeerId) => Pipe) | undefined;
  /** Authenticated connections, and our dials still authenticating, by peer. */
  readonly #byPeer = new Map<PeerId, Connection>();
  /** Accepted connections still authenticating, with their source address. */
  readonly #accepting = new Map<Connection, string>();
  /** How many of them per source address. */
  readonly #acceptingBySource = new Map<string, number>();
  readonly #stats: TransportStats = { refused: 0, undeliverable: 0, malformed: 0, refusedAtCap: 0 };
  readonly #refusals: RefusalLog;
  readonly #allClosed: (() => void)[] = [];
  readonly #faults: FaultSet;
  #shutDown = false;

  constructor(options: TransportOptions, dialPipe: ((peer: PeerId) => Pipe) | undefined) {
    checkSecret(options.secret);
    this.nodeId = options.nodeId;
    this.#options = options;
    this.#faults = options.faults ?? NO_FAULTS;
    this.#dialPipe = options.dial ? dialPipe : undefined;
    this.#refusals = new RefusalLog(options.log ?? ((line) => process.stderr.write(`${line}\n`)));
  }

  /**
   * Whether a connection from `source` may be accepted: under the caps on connections still
   * authenticating (per node, per source). False counts and logs the refusal: close it at once.
   */
  admits(source: string): boolean {
    if (this.#faults.has('lift-preauth-limits')) return true;
    const perSource = this.#options.maxUnauthenticatedPerSource ?? DEFAULT_MAX_UNAUTHENTICATED_PER_SOURCE;
    const total = this.#options.maxUnauthenticated ?? DEFAULT_MAX_UNAUTHENTICATED;
    const kind =
      this.#accepting.size >= total
        ? 'node-cap'
        : (this.#acceptingBySource.get(source) ?? 0) >= perSource
          ? 'source-cap'
          : undefined;
    if (kind === undefined) return true;
    this.#stats.refusedAtCap++;
    const why =
      kind === 'node-cap'
        ? `${total} connections are authenticating`
        : `${perSource} connections from it are authenticating`;
    this.#refusals.refused(kind, source, why, Date.now());
    return false;
  }

  /** A connection someone opened to us, from `source` (its address); refused at a cap (see admits). */
  accept(pipe: Pipe, source: string): void {
    if (this.#shutDown) return pipe.destroy('this node is shutting down');
    if (!this.admits(source)) return pipe.destroy('too many connections are authenticating');
    this.#acceptingBySource.set(source, (this.#acceptingBySource.get(source) ?? 0) + 1);
    this.#accepting.set(this.#connect(pipe, 'acceptor', undefined), source);
  }

  send(peer: PeerId, message: Message): void {
    if (this.#shutDown) return;
    let c = this.#byPeer.get(peer);
    if (c === undefined) {
      if (this.#dialPipe === undefined) {
        this.#stats.undeliverable++;
        return;
      }
      c = this.#connect(this.#dialPipe(peer), 'dialer', peer);
      this.#byPeer.set(peer, c);
    }
    c.send(message);
  }

  closePeer(peer: PeerId, reason: string): void {
    const c = this.#byPeer.get(peer);
    if (c !== undefined) c.close(reason);
    else queueMicrotask(() => this.#options.handlers.closed(peer, reason));
  }

  isConnected(peer: PeerId): boolean {
    return this.#byPeer.get(peer)?.peer !== undefined;
  }

  bufferedBytes(peer: PeerId): number {
    return this.#byPeer.get(peer)?.bufferedBytes ?? 0;
  }

  whenDrained(peer: PeerId): Promise<void> {
    return this.#byPeer.get(peer)?.whenDrained() ?? Promise.resolve();
  }

  stats(): TransportStats {
    return { ...this.#stats };
  }

  close(): Promise<void> {
    this.#shutDown = true;
    const open = [...this.#byPeer.values(), ...this.#accepting.keys()].filter((c) => !c.isClosed);
    if (open.length === 0) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.#allClosed.push(resolve));
    for (const c of open) c.close('transport closed');
    return done;
  }

  #connect(pipe: Pipe, role: 'dialer' | 'acceptor', expectPeer: PeerId | undefined): Connection {
    const { chunks } = this.#options.handlers;
    return new Connection(pipe, {
      role,
      nodeId: this.nodeId,
      secret: this.#options.secret,
      nonce: randomBytes(NONCE_BYTES),
      expectPeer,
      maxFrameBytes: this.#options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
      handshakeTimeoutMs: this.#options.handshakeTimeoutMs ?? 5000,
      faults: this.#faults,
      onAuthenticated: (c, peer) => this.#onAuthenticated(c, peer),
      onMessage: (c, m) => {
        if (c.peer !== undefined) this.#options.handlers.message(c.peer, m);
      },
      ...(chunks === undefined ? {} : { chunks }),
      onClosed: (c, reason, malformed) => this.#onClosed(c, reason, malformed),
    });
  }

  #onAuthenticated(c: Connection, peer: PeerId): void {
    if (c.role === 'acceptor') {
      this.#stopAccepting(c);
      const old = this.#byPeer.get(peer);
      // The peer dialed again: its old connection is dead to it. End ours first, so the node
      // sees closed(peer) before connected(peer), and nothing from the old one after.
      if (old !== undefined) {
        this.#byPeer.delete(peer);
        old.close(`replaced by a new connection from ${peer}`);
        this.#options.handlers.closed(peer, `replaced by a new connection from ${peer}`);
      }
      this.#byPeer.set(peer, c);
    }
    this.#options.handlers.connected(peer);
  }

  /** c authenticated or closed: it no longer counts against the caps. True if it was authenticating. */
  #stopAccepting(c: Connection): boolean {
    const source = this.#accepting.get(c);
    if (source === undefined) return false;
    this.#accepting.delete(c);
    const left = (this.#acceptingBySource.get(source) ?? 1) - 1;
    if (left > 0) this.#acceptingBySource.set(source, left);
    else this.#acceptingBySource.delete(source);
    return true;
  }

  #onClosed(c: Connection, reason: string, malformed: boolean): void {
    const source = this.#accepting.get(c) ?? c.peer ?? 'a peer';
    if (malformed) {
      this.#stats.malformed++;
      this.#refusals.refused('malformed', source, reason, Date.now());
    }
    if (this.#stopAccepting(c)) {
      this.#stats.refused++;
      if (!malformed && !this.#shutDown) this.#refusals.refused('handshake', source, reason, Date.now());
    }
    for (const [peer, known] of this.#byPeer) {
      if (known !== c) continue;
      this.#byPeer.delete(peer);
      this.#options.handlers.closed(peer, reason);
    }
    if (this.#accepting.size === 0 && [...this.#byPeer.values()].every((x) => x.isClosed))
      for (const resolve of this.#allClosed.splice(0)) resolve();
  }
}
