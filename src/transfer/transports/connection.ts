// One cluster connection over a byte pipe: the authentication handshake, then framed messages.
// Owns: the frame reader, the handshake, the queue of messages sent before authentication,
// and closing the pipe with a clear reason on any malformed or unauthenticated frame.
// Must never: hand a message to the node before the peer's proof verified, keep reading after
// a malformed frame, or throw out of a pipe callback.
import { setTimeout, clearTimeout } from 'node:timers';
import { AuthError, Handshake, type HandshakeRole } from '../auth.js';
import { decodeAnyFrame, decodeFrame, encodeFrameParts, FrameReader } from '../codec.js';
import { isCodecError } from '../codec-fields.js';
import type { Message } from '../messages.js';
import type { Pipe } from './pipe.js';

export interface ConnectionOptions {
  readonly role: HandshakeRole;
  readonly nodeId: string;
  readonly secret: string | Uint8Array;
  readonly nonce: Uint8Array;
  readonly expectPeer?: string;
  readonly maxFrameBytes: number;
  readonly handshakeTimeoutMs: number;
  readonly onAuthenticated: (connection: Connection, peer: string) => void;
  readonly onMessage: (connection: Connection, message: Message) => void;
  readonly onClosed: (connection: Connection, reason: string, malformed: boolean) => void;
}

export class Connection {
  readonly role: HandshakeRole;
  readonly #pipe: Pipe;
  readonly #options: ConnectionOptions;
  readonly #reader: FrameReader;
  readonly #handshake: Handshake;
  readonly #pending: Message[] = [];
  readonly #drainWaiters: (() => void)[] = [];
  #peer: string | undefined;
  #closed = false;
  #closeReason: string | undefined;
  #malformed = false;
  readonly #timer: ReturnType<typeof setTimeout>;

  constructor(pipe: Pipe, options: ConnectionOptions) {
    this.role = options.role;
    this.#pipe = pipe;
    this.#options = options;
    this.#reader = new FrameReader(options.maxFrameBytes);
    this.#handshake = new Handshake({ secret: options.secret, nodeId: options.nodeId, role: options.role, nonce: options.nonce, expectPeer: options.expectPeer });
    pipe.onData((bytes) => this.#onData(bytes));
    pipe.onClose((reason) => this.#onPipeClosed(reason));
    pipe.onDrain(() => this.#drained());
    this.#timer = setTimeout(() => this.close(`no authentication within ${options.handshakeTimeoutMs} ms`), options.handshakeTimeoutMs);
    pipe.write([this.#handshake.start()]);
  }

  /** The authenticated peer, or undefined while the handshake runs. */
  get peer(): string | undefined {
    return this.#peer;
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  get bufferedBytes(): number {
    return this.#pipe.bufferedBytes;
  }

  send(message: Message): void {
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
      for (const frame of this.#reader.push(bytes)) {
        if (this.#closed) return;
        if (this.#peer !== undefined) {
          this.#options.onMessage(this, decodeFrame(frame, this.#options.maxFrameBytes));
          continue;
        }
        const step = this.#handshake.receive(decodeAnyFrame(frame, this.#options.maxFrameBytes));
        if (step.send.length > 0) this.#pipe.write(step.send);
        if (step.peer !== undefined) this.#authenticated(step.peer);
      }
    } catch (error) {
      if (!isCodecError(error) && !(error instanceof AuthError)) throw error;
      this.#malformed = isCodecError(error);
      this.close(error.message);
    }
  }

  #authenticated(peer: string): void {
    clearTimeout(this.#timer);
    this.#peer = peer;
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
