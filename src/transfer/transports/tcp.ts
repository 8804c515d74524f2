// The TCP transport: node:net sockets with TCP_NODELAY, one per peer pair, authenticated, framed.
// Owns: the listener (127.0.0.1 by default), dialing "host:port" peer ids, the socket pipe
// (cork/uncork so a frame's head and payload leave in one write, backpressure from the
// socket's write buffer; reads into one reused buffer per socket).
// Must never: listen on a public interface unless told to, or turn a socket error into a throw.
//
// Why a reused read buffer: a socket's 'data' events hand out a freshly allocated 64 KiB buffer
// per read, and on loopback allocating, faulting in and collecting those costs more CPU than the
// kernel's copy itself (measured on this project's 2-core machines: ~270 ms per GiB received,
// against ~130 ms reading into one buffer). Node's `onread` option reads into a buffer of ours
// instead; the pieces a pipe hands on are then views valid only during the callback
// (frame-stream.ts consumes them at once). Why 1 MiB: fewer, larger reads; each read that
// reopens the receive window also runs the loopback peer's ACK and transmit work on the reader's
// CPU. A decode node receiving KvChunks spent ~480 ms per GiB with 256 KiB reads, ~380 with 1 MiB.
import { createServer, connect, Socket, type OnReadOpts, type Server, type SocketConstructorOpts } from 'node:net';
import { ConfigError } from '../../core/index.js';
import type { PeerId } from '../machine.js';
import { PeerTransport } from './peer-transport.js';
import type { Pipe } from './pipe.js';
import type { TransportOptions } from './types.js';

/** Write-buffer level above which write() reports backpressure (the socket's own high-water mark is 16 KiB). */
const HIGH_WATER_BYTES = 4 * 1024 * 1024;

/** Bytes one read may bring into a socket's reused buffer. */
const READ_BUFFER_BYTES = 1024 * 1024;

/**
 * Its read buffer until the peer authenticated: a handshake frame is at most 4 KiB
 * (connection.ts), and 3000 silent strangers must not cost 3000 MiB.
 */
const HANDSHAKE_READ_BUFFER_BYTES = 4096;

/**
 * One socket's read buffer and the pipe's data callbacks: the socket's `onread` option. Node
 * asks `buffer()` for the buffer of the next read after each read: a small one until the pipe
 * is told the peer authenticated, then one of READ_BUFFER_BYTES, allocated then.
 */
class ReadBuffer {
  readonly #callbacks: ((bytes: Uint8Array) => void)[] = [];
  #small: Uint8Array | undefined;
  #large: Uint8Array | undefined;

  /** `largeAtOnce`: the full buffer before authentication (test-only, `lift-preauth-limits`). */
  constructor(largeAtOnce = false) {
    if (largeAtOnce) this.#large = new Uint8Array(READ_BUFFER_BYTES);
    else this.#small = new Uint8Array(HANDSHAKE_READ_BUFFER_BYTES);
  }

  readonly onread: OnReadOpts = {
    buffer: () => this.#large ?? (this.#small as Uint8Array),
    callback: (numBytes, buffer) => {
      const bytes = buffer.subarray(0, numBytes);
      for (const callback of this.#callbacks) callback(bytes);
      return true; // keep reading: every callback consumes the bytes before it returns
    },
  };

  onData(callback: (bytes: Uint8Array) => void): void {
    this.#callbacks.push(callback);
  }

  authenticated(): void {
    this.#large ??= new Uint8Array(READ_BUFFER_BYTES);
    this.#small = undefined;
  }
}

/** A dialed socket that reads into a reused buffer. */
function dialPipe(host: string, port: number): Pipe {
  const reads = new ReadBuffer();
  return socketPipe(connect({ host, port, onread: reads.onread }), reads);
}

/**
 * An accepted socket (paused on connect) as a pipe that reads into a reused buffer. Node takes
 * `onread` only from the options of a socket it constructs, not for accepted ones, so the
 * accepted socket's handle moves to a socket constructed with it, the way net.Server builds an
 * accepted socket from its handle (`new Socket({ handle })`); the emptied socket is destroyed,
 * which closes nothing and only settles the server's connection count. Where that handle is not
 * there (another runtime), the accepted socket reads as usual, through 'data' events.
 */
function acceptedPipe(accepted: Socket, largeAtOnce: boolean): Pipe {
  const internals = accepted as unknown as { _handle: unknown };
  const handle = internals._handle;
  if (handle === null || typeof handle !== 'object') {
    accepted.resume();
    return socketPipe(accepted);
  }
  internals._handle = null;
  accepted.destroy();
  const reads = new ReadBuffer(largeAtOnce);
  const options: SocketConstructorOpts & { handle: unknown; onread: OnReadOpts } = {
    handle,
    readable: true,
    writable: true,
    onread: reads.onread,
  };
  return socketPipe(new Socket(options), reads);
}

/** A pipe over socket; `reads` when the socket was made to read into a ReadBuffer (its 'data' events never fire). */
export function socketPipe(socket: Socket, reads?: ReadBuffer): Pipe {
  socket.setNoDelay(true);
  let reason: string | undefined;
  socket.on('error', (error) => {
    reason ??= error.message;
  });
  return {
    write(parts) {
      if (socket.destroyed) return false;
      socket.cork();
      for (const part of parts) socket.write(part);
      socket.uncork();
      return socket.writableLength < HIGH_WATER_BYTES;
    },
    onData: (callback) => {
      if (reads !== undefined) reads.onData(callback);
      else
        socket.on('data', (bytes: Buffer) =>
          callback(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)),
        );
    },
    onClose: (callback) => socket.once('close', () => callback(reason ?? 'connection closed by the peer')),
    onDrain: (callback) => socket.on('drain', callback),
    destroy(why) {
      reason ??= why;
      socket.destroy();
    },
    get bufferedBytes() {
      return socket.writableLength;
    },
    authenticated: () => reads?.authenticated(),
  };
}

/** "host:port" or "[v6]:port" -> parts. */
export function parseAddress(address: string): { readonly host: string; readonly port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
  const port = Number(match?.[3]);
  if (match === null || !(port > 0 && port < 65536))
    throw new ConfigError(`${JSON.stringify(address)} is not a host:port address`);
  return { host: match[1] ?? (match[2] as string), port };
}

export interface TcpListenOptions extends Omit<TransportOptions, 'nodeId'> {
  /** Interface to listen on. Default 127.0.0.1: internal ports stay on loopback unless told. */
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  /** The id peers dial and see, default "host:port" of the listener. */
  readonly nodeId?: PeerId;
}

export class TcpTransport extends PeerTransport {
  readonly #server: Server | undefined;

  private constructor(options: TransportOptions, server: Server | undefined) {
    super(options, (peer) => {
      const { host, port } = parseAddress(peer);
      return dialPipe(host, port);
    });
    this.#server = server;
  }

  /** A node that listens (prefill, decode; a router too if workers should reach it). */
  static async listen(options: TcpListenOptions): Promise<TcpTransport> {
    const server = createServer({ pauseOnConnect: true });
    const host = options.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const nodeId = options.nodeId ?? (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);
    const transport = new TcpTransport({ ...options, nodeId }, server);
    server.on('connection', (socket) => {
      // Caps close the oldest strangers (peer-transport.ts); only the test-only refuse-at-preauth-cap
      // refuses here, before the handle moves (and before any read buffer exists).
      const source = socket.remoteAddress ?? 'unknown';
      const lifted = options.faults?.has('lift-preauth-limits') === true;
      if (transport.admits(source)) transport.accept(acceptedPipe(socket, lifted), source);
      else socket.destroy();
    });
    return transport;
  }

  /** A node that only dials (a router). */
  static client(options: TransportOptions): TcpTransport {
    return new TcpTransport(options, undefined);
  }

  override async close(): Promise<void> {
    const closing = super.close();
    if (this.#server !== undefined)
      await new Promise<void>((resolve) => (this.#server as Server).close(() => resolve()));
    await closing;
  }
}
