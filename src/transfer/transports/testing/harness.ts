// Test support for the transport suites (transports.test.ts, transports-preauth.test.ts): a node
// that records every handler call, harnesses that make memory or TCP nodes and raw pipes to them,
// and a raw authentication over a pipe. Not used outside tests.
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { asRequestId, FaultSet } from '../../../core/index.js';
import { Handshake } from '../../auth.js';
import { decodeAnyFrame, FrameReader } from '../../codec.js';
import type { KvChunkHead, Message } from '../../messages.js';
import { MemoryNetwork } from '../memory.js';
import type { Pipe } from '../pipe.js';
import { parseAddress, socketPipe, TcpTransport } from '../tcp.js';
import type { Transport, TransportOptions } from '../types.js';

export const SECRET = 'a-cluster-secret-of-32-bytes!!!!';

/** Records every handler call of one node (with `streamed`, KvChunks arrive through chunk handlers). */
export class Recorder {
  readonly events: string[] = [];
  readonly messages: { from: string; message: Message }[] = [];
  readonly heads: KvChunkHead[] = [];
  readonly pieces: Uint8Array[] = [];
  readonly #waiters: { test: () => boolean; resolve: () => void }[] = [];
  readonly chunks = {
    begin: (from: string, head: KvChunkHead) => {
      this.heads.push(head);
      this.#push(`begin ${from} ${head.seq}`);
    },
    piece: (_from: string, bytes: Uint8Array) => {
      this.pieces.push(bytes.slice()); // lent for the call only
      if (this.events.at(-1) !== 'piece') this.#push('piece');
    },
    end: (from: string) => this.#push(`end ${from}`),
  };
  readonly handlers = {
    connected: (peer: string) => this.#push(`connected ${peer}`),
    message: (from: string, message: Message) => {
      this.messages.push({ from, message });
      this.#push(`message ${from} ${message.type}`);
    },
    closed: (peer: string, reason: string) => this.#push(`closed ${peer}: ${reason}`),
  };
  #push(event: string): void {
    this.events.push(event);
    for (const w of [...this.#waiters]) if (w.test()) w.resolve();
  }
  until(test: () => boolean, what: string): Promise<void> {
    if (test()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out waiting for ${what}; saw ${JSON.stringify(this.events)}`)),
        5000,
      );
      this.#waiters.push({ test, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }
  untilEvent(pattern: RegExp): Promise<void> {
    return this.until(() => this.events.some((e) => pattern.test(e)), String(pattern));
  }
}

export interface Node {
  readonly transport: Transport;
  readonly recorder: Recorder;
}

/** The pre-authentication limits of a listening node, and where it logs refusals. */
export type Limits = Pick<TransportOptions, 'maxUnauthenticated' | 'maxUnauthenticatedPerSource' | 'log' | 'faults'>;

/** Negative controls: the defence of a test switched off. */
export const CLOSE_ON_BAD_RESERVE = new FaultSet(['close-on-bad-reserve']);
export const LIFT_PREAUTH_LIMITS = new FaultSet(['lift-preauth-limits']);

export interface Harness {
  /** A listening node; dials when `dial`; takes KvChunks in pieces when `streamed`. */
  node(options: { dial: boolean; secret?: string; streamed?: boolean; limits?: Limits }): Promise<Node>;
  /** A node that only dials. */
  client(options: { secret?: string }): Node;
  raw(target: string): Pipe;
  cleanup(): Promise<void>;
}

export function memoryHarness(): Harness {
  const net = new MemoryNetwork();
  const all: Transport[] = [];
  let n = 0;
  const make = (dial: boolean, secret = SECRET, streamed = false, limits: Limits = {}): Node => {
    const recorder = new Recorder();
    const transport = net.listen({
      nodeId: `mem-${n++}:1`,
      secret,
      handlers: streamed ? { ...recorder.handlers, chunks: recorder.chunks } : recorder.handlers,
      dial,
      ...limits,
    });
    all.push(transport);
    return { transport, recorder };
  };
  return {
    node: async ({ dial, secret, streamed, limits }) => make(dial, secret, streamed, limits),
    client: ({ secret }) => make(true, secret),
    raw: (target) => net.rawConnect(target),
    cleanup: async () => void (await Promise.all(all.map((t) => t.close()))),
  };
}

export function tcpHarness(): Harness {
  const all: Transport[] = [];
  let n = 0;
  return {
    node: async ({ dial, secret, streamed, limits }) => {
      const recorder = new Recorder();
      const transport = await TcpTransport.listen({
        secret: secret ?? SECRET,
        handlers: streamed ? { ...recorder.handlers, chunks: recorder.chunks } : recorder.handlers,
        dial,
        ...limits,
      });
      all.push(transport);
      return { transport, recorder };
    },
    client: ({ secret }) => {
      const recorder = new Recorder();
      const transport = TcpTransport.client({
        nodeId: `router-${n++}`,
        secret: secret ?? SECRET,
        handlers: recorder.handlers,
        dial: true,
      });
      all.push(transport);
      return { transport, recorder };
    },
    raw: (target) => {
      const { host, port } = parseAddress(target);
      return socketPipe(connect({ host, port }));
    },
    cleanup: async () => void (await Promise.all(all.map((t) => t.close()))),
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const rid = asRequestId('r1');
export const ack = (i: number): Message => ({ type: 'Tokens', rid, offset: i, ids: [i], logprobs: [] });

/** Proves the cluster secret over a raw pipe (as a dialer named nodeId); resolves once the peer accepted. */
export function authenticate(pipe: Pipe, nodeId: string): Promise<void> {
  const handshake = new Handshake({ secret: SECRET, nodeId, role: 'dialer', nonce: randomBytes(32) });
  const reader = new FrameReader();
  let done = false;
  return new Promise((resolve, reject) => {
    pipe.onData((bytes) => {
      if (done) return;
      for (const frame of reader.push(bytes)) {
        const step = handshake.receive(decodeAnyFrame(frame));
        if (step.send.length > 0) pipe.write(step.send);
        if (step.peer !== undefined) {
          done = true;
          resolve();
        }
      }
    });
    pipe.onClose((reason) => reject(new Error(reason)));
    pipe.write([handshake.start()]);
  });
}
