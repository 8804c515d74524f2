// The transport logic both transports share: one connection per peer, dial or accept, the
// events handed to the node. TCP and memory differ only in how a Pipe is made.
// Owns: the peer -> connection table, dialing, replacing a stale accepted connection.
// Must never: call a handler re-entrantly from send()/closePeer(), report `closed` for a
// connection that never authenticated and was not ours to dial, or keep two connections to one peer.
import { randomBytes } from 'node:crypto';
import { DEFAULT_MAX_FRAME_BYTES } from '../codec.js';
import type { PeerId } from '../machine.js';
import type { Message } from '../messages.js';
import { NONCE_BYTES, checkSecret } from '../auth.js';
import { Connection } from './connection.js';
import type { Pipe } from './pipe.js';
import type { Transport, TransportOptions, TransportStats } from './types.js';

export class PeerTransport implements Transport {
  readonly nodeId: PeerId;
  readonly #options: TransportOptions;
  readonly #dialPipe: ((peer: PeerId) => Pipe) | undefined;
  /** Authenticated connections, and our dials still authenticating, by peer. */
  readonly #byPeer = new Map<PeerId, Connection>();
  /** Accepted connections still authenticating. */
  readonly #accepting = new Set<Connection>();
  readonly #stats: TransportStats = { refused: 0, undeliverable: 0, malformed: 0 };
  readonly #allClosed: (() => void)[] = [];
  #shutDown = false;

  constructor(options: TransportOptions, dialPipe: ((peer: PeerId) => Pipe) | undefined) {
    checkSecret(options.secret);
    this.nodeId = options.nodeId;
    this.#options = options;
    this.#dialPipe = options.dial ? dialPipe : undefined;
  }

  /** A connection someone opened to us. */
  accept(pipe: Pipe): void {
    if (this.#shutDown) return pipe.destroy('this node is shutting down');
    this.#accepting.add(this.#connect(pipe, 'acceptor', undefined));
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
    const open = [...this.#byPeer.values(), ...this.#accepting].filter((c) => !c.isClosed);
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
      this.#accepting.delete(c);
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

  #onClosed(c: Connection, reason: string, malformed: boolean): void {
    if (malformed) this.#stats.malformed++;
    if (this.#accepting.delete(c)) this.#stats.refused++;
    for (const [peer, known] of this.#byPeer) {
      if (known !== c) continue;
      this.#byPeer.delete(peer);
      this.#options.handlers.closed(peer, reason);
    }
    if (this.#accepting.size === 0 && [...this.#byPeer.values()].every((x) => x.isClosed)) for (const resolve of this.#allClosed.splice(0)) resolve();
  }
}
