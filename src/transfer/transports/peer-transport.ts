// The transport logic both transports share: one connection per peer, dial or accept, the
// events handed to the node. TCP and memory differ only in how a Pipe is made.
// Owns: the peer -> connection table, dialing, replacing a stale accepted connection, and the
// caps on accepted connections still authenticating (preauth-room.ts: over a cap the oldest
// stranger is closed, a newcomer is never refused).
// Must never: call a handler re-entrantly from send()/closePeer(), report `closed` for a
// connection that never authenticated and was not ours to dial, keep two connections to one
// peer, or close or count an authenticated connection for a cap.
import { randomBytes } from 'node:crypto';
import { NO_FAULTS, type FaultSet } from '../../core/index.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../codec.js';
import type { PeerId } from '../machine.js';
import type { Message } from '../messages.js';
import type { PrefixMessage } from '../prefix-fetch-messages.js';
import { NONCE_BYTES, checkSecret } from '../auth.js';
import { Connection } from './connection.js';
import type { Pipe } from './pipe.js';
import { PreauthRoom, type CapKind, type PreauthCaps } from './preauth-room.js';
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
  /** Accepted connections still authenticating, oldest first, with their source address. */
  readonly #accepting = new PreauthRoom<Connection>((c) => c.greeted);
  /** Closed to make room: their close is not a failed handshake. */
  readonly #evicted = new WeakSet<Connection>();
  #trimScheduled = false;
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

  #caps(): PreauthCaps {
    return {
      total: this.#options.maxUnauthenticated ?? DEFAULT_MAX_UNAUTHENTICATED,
      perSource: this.#options.maxUnauthenticatedPerSource ?? DEFAULT_MAX_UNAUTHENTICATED_PER_SOURCE,
    };
  }

  /**
   * Whether a connection from `source` may be accepted. Always, unless the test-only
   * `refuse-at-preauth-cap` (the old rule: refused at a full cap, peers from that address too);
   * false counts and logs the refusal: close it at once.
   */
  admits(source: string): boolean {
    if (!this.#faults.has('refuse-at-preauth-cap') || this.#faults.has('lift-preauth-limits')) return true;
    const { total, perSource } = this.#caps();
    const kind: CapKind | undefined =
      this.#accepting.size >= total
        ? 'node-cap'
        : this.#accepting.fromSource(source) >= perSource
          ? 'source-cap'
          : undefined;
    if (kind === undefined) return true;
    this.#stats.refusedAtCap++;
    this.#refusals.refused(kind, source, this.#capReason(kind), Date.now());
    return false;
  }

  /**
   * A connection someone opened to us, from `source` (its address). It enters the room of
   * connections still authenticating; when that is over a cap, the oldest strangers are closed
   * (preauth-room.ts): at once past twice the node cap (a bound on sockets and buffers), else
   * two event-loop turns later, once what the newcomers already sent (a peer's Hello) was read.
   */
  accept(pipe: Pipe, source: string): void {
    if (this.#shutDown) return pipe.destroy('this node is shutting down');
    if (!this.admits(source)) return pipe.destroy('too many connections are authenticating');
    this.#accepting.enter(this.#connect(pipe, 'acceptor', undefined), source);
    if (this.#faults.has('lift-preauth-limits')) return;
    const caps = this.#caps();
    if (this.#accepting.size > 2 * caps.total) this.#makeRoom({ total: 2 * caps.total, perSource: Infinity });
    if (this.#trimScheduled) return;
    this.#trimScheduled = true;
    setImmediate(() =>
      setImmediate(() => {
        this.#trimScheduled = false;
        this.#makeRoom(this.#caps());
      }),
    );
  }

  #makeRoom(caps: PreauthCaps): void {
    for (const { c, kind } of this.#accepting.over(caps)) {
      const source = this.#accepting.sourceOf(c) ?? 'unknown';
      this.#stats.refusedAtCap++;
      this.#refusals.refused(kind, source, `closed its oldest: ${this.#capReason(kind)}`, Date.now());
      this.#evicted.add(c);
      c.close(`closed to make room: ${this.#capReason(kind)}`);
    }
  }

  #capReason(kind: CapKind): string {
    const { total, perSource } = this.#caps();
    return kind === 'node-cap'
      ? `${total} connections are authenticating`
      : `${perSource} connections from it are authenticating`;
  }

  send(peer: PeerId, message: Message | PrefixMessage): void {
    if (this.#shutDown) return;
    let c = this.#byPeer.get(peer);
    if (c === undefined) {
      if (this.#dialPipe === undefined) {
        this.#stats.undeliverable++;
        return;
      }
      let pipe: Pipe;
      try {
        pipe = this.#dialPipe(peer);
      } catch (error) {
        // A peer that reached us but is no address to dial (a router's id, once its connection
        // closed): the message is dropped and the peer reported gone, as a refused dial would be.
        this.#stats.undeliverable++;
        const reason = `cannot dial ${peer}: ${error instanceof Error ? error.message : String(error)}`;
        queueMicrotask(() => this.#options.handlers.closed(peer, reason));
        return;
      }
      c = this.#connect(pipe, 'dialer', peer);
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
    const open = [...this.#byPeer.values(), ...this.#accepting.members()].filter((c) => !c.isClosed);
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
      onPrefix: (c, m) => {
        if (c.peer !== undefined) this.#options.handlers.prefix?.(c.peer, m);
      },
      onClosed: (c, reason, malformed) => this.#onClosed(c, reason, malformed),
    });
  }

  #onAuthenticated(c: Connection, peer: PeerId): void {
    if (c.role === 'acceptor') {
      // Out of the room: never counted or closed for a cap again (unless the test-only fault).
      if (!this.#faults.has('evict-authenticated-peers')) this.#accepting.leave(c);
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
    const source = this.#accepting.sourceOf(c) ?? c.peer ?? 'a peer';
    if (malformed) {
      this.#stats.malformed++;
      this.#refusals.refused('malformed', source, reason, Date.now());
    }
    if (this.#accepting.leave(c) && c.peer === undefined) {
      this.#stats.refused++;
      if (!malformed && !this.#shutDown && !this.#evicted.has(c))
        this.#refusals.refused('handshake', source, reason, Date.now());
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
