// One cluster connection over a byte pipe: the authentication handshake, then framed messages.
// Owns: the frame stream, the handshake, the queue of messages sent before authentication,
// and closing the pipe with a clear reason on any malformed or unauthenticated frame (except a
// Reserve whose fields break one request's rules: that request alone is Rejected).
// Must never: hand a message or a payload piece to the node before the peer's proof verified,
// hand anything on after the connection closed or after a malformed frame, or throw out of a
// pipe callback.
// KvChunk payloads go to `chunks` in pieces as they arrive when the node gives chunk handlers
// (frame-stream.ts); every other frame, and every frame for a node without them, whole.
import { setTimeout, clearTimeout } from 'node:timers';
import type { FaultSet } from '../../core/index.js';
import { AuthError, Handshake, type HandshakeRole } from '../auth.js';
import { decodeAnyFrame, decodeClusterFrame, encodeFrameParts, refusableRequest } from '../codec.js';
import { isCodecError } from '../codec-fields.js';
import { FrameStream } from '../frame-stream.js';
import type { Message } from '../messages.js';
import type { PrefixMessage } from '../prefix-fetch-messages.js';
import type { Pipe } from './pipe.js';
import type { ChunkHandlers } from './types.js';

/**
 * The largest frame before the peer authenticated: Hello and Proof are a few hundred bytes. A
 * stranger may not make this node buffer a frame of maxFrameBytes (64 MiB) before it proved anything.
 */
export const HANDSHAKE_MAX_FRAME_BYTES = 4096;

export interface ConnectionOptions {
  readonly role: HandshakeRole;
  readonly nodeId: string;
  readonly secret: string | Uint8Array;
  readonly nonce: Uint8Array;
  readonly expectPeer?: string;
  readonly maxFrameBytes: number;
  readonly handshakeTimeoutMs: number;
  /** `close-on-bad-reserve`: no Rejected for a bad Reserve, the connection closes; `lift-preauth-limits`: no small handshake frame bound. */
  readonly faults: FaultSet;
  readonly onAuthenticated: (connection: Connection, peer: string) => void;
  readonly onMessage: (connection: Connection, message: Message) => void;
  /** The prefix store's messages (prefix-fetch-messages.ts); absent: dropped. */
  readonly onPrefix?: (connection: Connection, message: PrefixMessage) => void;
  /** KvChunks from the authenticated peer as they arrive (a piece is valid only during the call); absent: whole messages. */
  readonly chunks?: ChunkHandlers;
  readonly onClosed: (connection: Connection, reason: string, malformed: boolean) => void;
}

export class Connection {
  readonly role: HandshakeRole;
  readonly #pipe: Pipe;
  readonly #options: ConnectionOptions;
  readonly #stream: FrameStream;
  readonly #handshake: Handshake;
  readonly #pending: (Message | PrefixMessage)[] = [];
  readonly #drainWaiters: (() => void)[] = [];
  #peer: string | undefined;
  #closed = false;
  #closeReason: string | undefined;
  #malformed = false;
  /** A valid handshake frame came from the peer (it is not a silent stranger; preauth-room.ts). */
  #greeted = false;
  readonly #timer: ReturnType<typeof setTimeout>;
  /** The largest frame before the peer authenticated. */
  readonly #handshakeMaxFrameBytes: number;

  constructor(pipe: Pipe, options: ConnectionOptions) {
    this.role = options.role;
    this.#pipe = pipe;
    this.#options = options;
    // The stream yields chunk events only once #authenticated turned streaming on, which it does
    // only when chunks are given; none go on after close.
    const { chunks } = options;
    this.#handshakeMaxFrameBytes = options.faults.has('lift-preauth-limits')
      ? options.maxFrameBytes
      : Math.min(HANDSHAKE_MAX_FRAME_BYTES, options.maxFrameBytes);
    this.#stream = new FrameStream(
      {
        frame: (bytes) => this.#onFrame(bytes),
        chunkBegin: (head) => {
          const peer = this.#openPeer();
          if (peer !== undefined) chunks?.begin(peer, head);
        },
        chunkPiece: (bytes) => {
          const peer = this.#openPeer();
          if (peer !== undefined) chunks?.piece(peer, bytes);
        },
        chunkEnd: () => {
          const peer = this.#openPeer();
          if (peer !== undefined) chunks?.end(peer);
        },
      },
      this.#handshakeMaxFrameBytes,
    );
    this.#handshake = new Handshake({
      secret: options.secret,
      nodeId: options.nodeId,
      role: options.role,
      nonce: options.nonce,
      expectPeer: options.expectPeer,
    });
    pipe.onData((bytes) => this.#onData(bytes));
    pipe.onClose((reason) => this.#onPipeClosed(reason));
    pipe.onDrain(() => this.#drained());
    this.#timer = setTimeout(
      () => this.close(`no authentication within ${options.handshakeTimeoutMs} ms`),
      options.handshakeTimeoutMs,
    );
    pipe.write([this.#handshake.start()]);
  }

  /** The authenticated peer, or undefined while the handshake runs. */
  get peer(): string | undefined {
    return this.#peer;
  }

  /** Whether the peer has sent a valid handshake frame (its Hello), authenticated or not. */
  get greeted(): boolean {
    return this.#greeted;
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  get bufferedBytes(): number {
    return this.#pipe.bufferedBytes;
  }

  send(message: Message | PrefixMessage): void {
    if (this.#closed) return;
    if (this.#peer === undefined) this.#pending.push(message);
    else this.#pipe.write(encodeFrameParts(message));
  }

  whenDrained(): Promise<void> {
    if (this.#closed || this.#pipe.bufferedBytes === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  close(reason: string): void {
    if (this.#closed) return;
    this.#closeReason ??= reason;
    this.#closed = true;
    this.#pipe.destroy(reason);
  }

  #onData(bytes: Uint8Array): void {
    if (this.#closed) return;
    try {
      this.#stream.push(bytes);
    } catch (error) {
      if (!isCodecError(error) && !(error instanceof AuthError)) throw error;
      if (this.#closed) return;
      this.#malformed = isCodecError(error);
      this.close(error.message);
    }
  }

  /** A whole frame: a message once authenticated, else the next handshake step. */
  #onFrame(frame: Uint8Array): void {
    if (this.#closed) return;
    if (this.#peer !== undefined) {
      let decoded: ReturnType<typeof decodeClusterFrame>;
      try {
        decoded = decodeClusterFrame(frame, this.#options.maxFrameBytes);
      } catch (error) {
        // A Reserve that breaks one request's rules fails that request alone (codec.ts).
        const refusable = isCodecError(error) && !this.#options.faults.has('close-on-bad-reserve');
        const rid = refusable ? refusableRequest(frame) : undefined;
        if (rid === undefined || !isCodecError(error)) throw error;
        this.#pipe.write(
          encodeFrameParts({ type: 'Rejected', rid, code: 'invalid_request', message: error.message.slice(0, 4096) }),
        );
        return;
      }
      if (decoded.kind === 'message') this.#options.onMessage(this, decoded.message);
      else this.#options.onPrefix?.(this, decoded.message);
      return;
    }
    const step = this.#handshake.receive(decodeAnyFrame(frame, this.#handshakeMaxFrameBytes));
    this.#greeted = true;
    if (step.send.length > 0) this.#pipe.write(step.send);
    if (step.peer !== undefined) this.#authenticated(step.peer);
  }

  /** The authenticated peer while the connection is open: whom a frame's events are from. */
  #openPeer(): string | undefined {
    return this.#closed ? undefined : this.#peer;
  }

  #authenticated(peer: string): void {
    clearTimeout(this.#timer);
    this.#peer = peer;
    this.#stream.maxFrameBytes = this.#options.maxFrameBytes;
    this.#pipe.authenticated();
    this.#stream.streamChunks = this.#options.chunks !== undefined;
    this.#options.onAuthenticated(this, peer);
    for (const m of this.#pending.splice(0)) this.send(m);
  }

  #onPipeClosed(reason: string): void {
    clearTimeout(this.#timer);
    this.#closed = true;
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
    this.#options.onClosed(this, this.#closeReason ?? reason, this.#malformed);
  }

  #drained(): void {
    if (this.#pipe.bufferedBytes > 0) return;
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
  }
}
