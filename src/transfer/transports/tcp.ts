// The TCP transport: node:net sockets with TCP_NODELAY, one per peer pair, authenticated, framed.
// Owns: the listener (127.0.0.1 by default), dialing "host:port" peer ids, the socket pipe
// (cork/uncork so a frame's head and payload leave in one write, backpressure from the
// socket's write buffer).
// Must never: listen on a public interface unless told to, or turn a socket error into a throw.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { ConfigError } from '../../core/index.js';
import type { PeerId } from '../machine.js';
import { PeerTransport } from './peer-transport.js';
import type { Pipe } from './pipe.js';
import type { TransportOptions } from './types.js';

/** Write-buffer level above which write() reports backpressure (the socket's own high-water mark is 16 KiB). */
const HIGH_WATER_BYTES = 4 * 1024 * 1024;

export function socketPipe(socket: Socket): Pipe {
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
    onData: (callback) => socket.on('data', (bytes: Buffer) => callback(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength))),
    onClose: (callback) => socket.once('close', () => callback(reason ?? 'connection closed by the peer')),
    onDrain: (callback) => socket.on('drain', callback),
    destroy(why) {
      reason ??= why;
      socket.destroy();
    },
    get bufferedBytes() {
      return socket.writableLength;
    },
  };
}

/** "host:port" or "[v6]:port" -> parts. */
export function parseAddress(address: string): { readonly host: string; readonly port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
  const port = Number(match?.[3]);
  if (match === null || !(port > 0 && port < 65536)) throw new ConfigError(`${JSON.stringify(address)} is not a host:port address`);
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
      return socketPipe(connect({ host, port }));
    });
    this.#server = server;
  }

  /** A node that listens (prefill, decode; a router too if workers should reach it). */
  static async listen(options: TcpListenOptions): Promise<TcpTransport> {
    const server = createServer();
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
    server.on('connection', (socket) => transport.accept(socketPipe(socket)));
    return transport;
  }

  /** A node that only dials (a router). */
  static client(options: TransportOptions): TcpTransport {
    return new TcpTransport(options, undefined);
  }

  override async close(): Promise<void> {
    const closing = super.close();
    if (this.#server !== undefined) await new Promise<void>((resolve) => (this.#server as Server).close(() => resolve()));
    await closing;
  }
}
