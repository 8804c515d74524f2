// A byte pipe under one connection: a TCP socket or an in-memory pair.
// Must never: deliver data after close, or report close more than once.

export interface Pipe {
  /** Writes the parts in order, as one unit when it can; false when the buffer is over its high-water mark. */
  write(parts: readonly Uint8Array[]): boolean;
  /** bytes: valid only during the callback (a TCP pipe reads into one reused buffer); copy to keep. */
  onData(callback: (bytes: Uint8Array) => void): void;
  /** Called once, asynchronously, when the pipe is closed from either end or fails. */
  onClose(callback: (reason: string) => void): void;
  onDrain(callback: () => void): void;
  /** Closes the pipe, dropping what is buffered; onClose follows with this reason. */
  destroy(reason: string): void;
  readonly bufferedBytes: number;
  /** The peer proved the cluster secret: the pipe may now read in large buffers (TCP: 1 MiB). */
  authenticated(): void;
}
