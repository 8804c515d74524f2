// The in-memory transport, for unit tests of workers and routers: the same connections,
// handshake, framing and events as TCP, over byte pipes that deliver asynchronously in order.
// Owns: MemoryNetwork (node id -> listener) and its pipes.
// Must never: be used outside tests, share a buffer between the two ends (bytes are copied),
// or deliver anything after a close.
import { setImmediate } from 'node:timers';
import type { PeerId } from '../machine.js';
import { PeerTransport } from './peer-transport.js';
import type { Pipe } from './pipe.js';
import type { TransportOptions } from './types.js';

const HIGH_WATER_BYTES = 1024 * 1024;

class MemoryEnd implements Pipe {
  other: MemoryEnd | undefined;
  readonly #inbox: Uint8Array[] = [];
  #inboxBytes = 0;
  #scheduled = false;
  #closed = false;
  #dataCallbacks: ((bytes: Uint8Array) => void)[] = [];
  #closeCallbacks: ((reason: string) => void)[] = [];
  #drainCallbacks: (() => void)[] = [];

  get bufferedBytes(): number {
    const other = this.other;
    return other === undefined ? 0 : other.#inboxBytes;
  }

  write(parts: readonly Uint8Array[]): boolean {
    const other = this.other;
    if (this.#closed || other === undefined) return false;
    for (const part of parts) {
      other.#inbox.push(part.slice());
      other.#inboxBytes += part.length;
    }
    other.#schedule();
    return other.#inboxBytes < HIGH_WATER_BYTES;
  }

  onData(callback: (bytes: Uint8Array) => void): void {
    this.#dataCallbacks.push(callback);
  }

  onClose(callback: (reason: string) => void): void {
    this.#closeCallbacks.push(callback);
  }

  onDrain(callback: () => void): void {
    this.#drainCallbacks.push(callback);
  }

  authenticated(): void {
    // Nothing to grow: an in-memory pipe hands over the writer's own copies.
  }

  destroy(reason: string): void {
    if (this.#closed) return;
    this.#end(reason);
    const other = this.other;
    if (other !== undefined) other.#end('connection closed by the peer');
  }

  #end(reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#inbox.length = 0;
    this.#inboxBytes = 0;
    setImmediate(() => {
      for (const callback of this.#closeCallbacks) callback(reason);
    });
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      while (!this.#closed && this.#inbox.length > 0) {
        const bytes = this.#inbox.shift() as Uint8Array;
        this.#inboxBytes -= bytes.length;
        for (const callback of this.#dataCallbacks) callback(bytes);
      }
      const writer = this.other;
      if (writer !== undefined && !writer.#closed) for (const callback of writer.#drainCallbacks) callback();
    });
  }

  static pair(): [MemoryEnd, MemoryEnd] {
    const a = new MemoryEnd();
    const b = new MemoryEnd();
    a.other = b;
    b.other = a;
    return [a, b];
  }
}

/** A set of in-memory nodes that can dial each other by id. */
export class MemoryNetwork {
  readonly #listeners = new Map<PeerId, PeerTransport>();

  /** A node on this network; it accepts connections to `options.nodeId`. */
  listen(options: TransportOptions): PeerTransport {
    const transport = new PeerTransport(options, (peer) => this.rawConnect(peer));
    this.#listeners.set(options.nodeId, transport);
    return transport;
  }

  /** A raw pipe to a node (tests write arbitrary bytes into it); refused when nobody listens there. */
  rawConnect(peer: PeerId): Pipe {
    const [mine, theirs] = MemoryEnd.pair();
    const listener = this.#listeners.get(peer);
    if (listener === undefined) setImmediate(() => mine.destroy(`connection refused: nothing listens at ${peer}`));
    else listener.accept(theirs, 'memory');
    return mine;
  }

  /** Removes a node (its transport should be closed first); later dials to it are refused. */
  remove(nodeId: PeerId): void {
    this.#listeners.delete(nodeId);
  }
}
