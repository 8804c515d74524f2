// What a transport is to a worker or router: messages to and from peers by id, close events
// as protocol inputs. One connection per peer pair carries every request between them.
// Must never: deliver a message from a peer that has not proved the cluster secret, deliver
// after it reported the connection closed (until a new `connected`), or reorder messages.
import type { FaultSet } from '../../core/index.js';
import type { KvChunkHead, Message } from '../messages.js';
import type { PrefixMessage } from '../prefix-fetch-messages.js';
import type { PeerId } from '../machine.js';

export interface TransportHandlers {
  /** A connection with peer authenticated (dialed by us or accepted); messages may follow. */
  connected(peer: PeerId): void;
  message(from: PeerId, message: Message): void;
  /**
   * The connection with peer is gone: closed by either side, reset, refused, a malformed frame
   * (reason says which), or closePeer. Whatever was in flight on it is lost.
   */
  closed(peer: PeerId, reason: string): void;
  /**
   * Given, KvChunk frames arrive through these as they come off the wire instead of through
   * message(): a node that lands payloads in pages as they arrive (decode). Absent, whole.
   */
  readonly chunks?: ChunkHandlers;
  /** The prefix store's messages (prefix-fetch-messages.ts), in order with the others; absent: dropped. */
  readonly prefix?: (from: PeerId, message: PrefixMessage) => void;
}

/**
 * One KvChunk at a time per peer: begin (its header, validated by the codec), its payload in
 * pieces (exactly head.payloadBytes bytes in all), then end. Nothing else from that peer comes
 * in between; when the connection closes mid-payload, closed(peer) comes instead of end.
 */
export interface ChunkHandlers {
  begin(from: PeerId, head: KvChunkHead): void;
  /** The next bytes of the payload: a view valid only during this call (a TCP pipe reuses its read buffer). */
  piece(from: PeerId, bytes: Uint8Array): void;
  end(from: PeerId): void;
}

export interface TransportOptions {
  /** This node's id: a worker's advertised internal address ("host:port"), or a router's name. */
  readonly nodeId: PeerId;
  /** The cluster secret (at least 16 bytes): every connection proves it before any message. */
  readonly secret: string | Uint8Array;
  readonly handlers: TransportHandlers;
  /**
   * Whether this node dials peers it has no connection to (router: yes; prefill: yes, to decode;
   * decode: no, it answers on the connections others opened). One side of each pair dials, so
   * a pair never ends up with two connections.
   */
  readonly dial: boolean;
  readonly maxFrameBytes?: number;
  /** A connection that has not authenticated within this time is closed. Default 5000. */
  readonly handshakeTimeoutMs?: number;
  /**
   * Accepted connections still authenticating, at most: past it the oldest are closed (silent ones
   * first; preauth-room.ts), a newcomer is never refused. Authenticated ones never count. Default 256.
   */
  readonly maxUnauthenticated?: number;
  /** The same, from one source address (its own oldest are closed). Default 32. */
  readonly maxUnauthenticatedPerSource?: number;
  /** Where refusals are logged (rate-limited, refusal-log.ts). Default: stderr. */
  readonly log?: (line: string) => void;
  /** Test-only fault points (`close-on-bad-reserve`, `lift-preauth-limits`, `refuse-at-preauth-cap`, `evict-authenticated-peers`). Default none. */
  readonly faults?: FaultSet;
}

export interface TransportStats {
  /** Accepted connections closed before they proved the secret (wrong secret, garbage, timeout). */
  refused: number;
  /** Messages for a peer with no connection, on a node that does not dial. */
  undeliverable: number;
  /** Connections closed for a malformed frame. */
  malformed: number;
  /** Accepted connections closed at a cap on those still authenticating (per node or per source). */
  refusedAtCap: number;
}

export interface Transport {
  readonly nodeId: PeerId;
  /** Queue message for peer, in order; dials first when allowed and not connected. Never throws for a dead peer: that comes as closed(). */
  send(peer: PeerId, message: Message | PrefixMessage): void;
  /** Close the connection with peer; handlers.closed(peer) follows, also when none was open. */
  closePeer(peer: PeerId, reason: string): void;
  isConnected(peer: PeerId): boolean;
  /** Bytes written to peer's connection and not yet taken by the kernel (backpressure). */
  bufferedBytes(peer: PeerId): number;
  /** Resolves once peer's connection has drained its write buffer (or is gone). */
  whenDrained(peer: PeerId): Promise<void>;
  stats(): TransportStats;
  /** Closes every connection (and the listener); resolves when all are closed. */
  close(): Promise<void>;
}
