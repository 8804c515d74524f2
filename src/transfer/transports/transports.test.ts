// One suite, run against every transport (memory and TCP): what a worker or router relies on.
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  asEpoch,
  asPageId,
  asRequestId,
  asTenantId,
  FaultSet,
  NO_FAULTS,
  samplingParams,
  type SamplingParams,
} from '../../core/index.js';
import { Handshake } from '../auth.js';
import { CODEC_VERSION, decodeAnyFrame, encodeFrame, FrameReader } from '../codec.js';
import type { KvChunkHead, Message } from '../messages.js';
import { MemoryNetwork } from './memory.js';
import type { Pipe } from './pipe.js';
import { parseAddress, socketPipe, TcpTransport } from './tcp.js';
import type { Transport, TransportOptions } from './types.js';

const SECRET = 'a-cluster-secret-of-32-bytes!!!!';

/** Records every handler call of one node (with `streamed`, KvChunks arrive through chunk handlers). */
class Recorder {
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

interface Node {
  readonly transport: Transport;
  readonly recorder: Recorder;
}

/** The pre-authentication limits of a listening node, and where it logs refusals. */
type Limits = Pick<TransportOptions, 'maxUnauthenticated' | 'maxUnauthenticatedPerSource' | 'log' | 'faults'>;

/** Negative controls: the defence of a test switched off. */
const CLOSE_ON_BAD_RESERVE = new FaultSet(['close-on-bad-reserve']);
const LIFT_PREAUTH_LIMITS = new FaultSet(['lift-preauth-limits']);

interface Harness {
  /** A listening node; dials when `dial`; takes KvChunks in pieces when `streamed`. */
  node(options: { dial: boolean; secret?: string; streamed?: boolean; limits?: Limits }): Promise<Node>;
  /** A node that only dials. */
  client(options: { secret?: string }): Node;
  raw(target: string): Pipe;
  cleanup(): Promise<void>;
}

function memoryHarness(): Harness {
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

function tcpHarness(): Harness {
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

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const rid = asRequestId('r1');
const ack = (i: number): Message => ({ type: 'Tokens', rid, offset: i, ids: [i], logprobs: [] });

/** Proves the cluster secret over a raw pipe (as a dialer named nodeId); resolves once the peer accepted. */
function authenticate(pipe: Pipe, nodeId: string): Promise<void> {
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

describe.each([
  ['memory', memoryHarness],
  ['tcp', tcpHarness],
] as const)('%s transport', (name, makeHarness) => {
  let h: Harness;
  afterEach(async () => {
    await h.cleanup();
  });

  it('authenticates, then carries messages both ways on one connection, in order', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false });
    const router = h.client({});
    for (let i = 0; i < 200; i++) router.transport.send(decode.transport.nodeId, ack(i));
    await decode.recorder.until(() => decode.recorder.messages.length === 200, '200 messages');
    expect(decode.recorder.events[0]).toBe(`connected ${router.transport.nodeId}`);
    expect(decode.recorder.messages.map((m) => (m.message.type === 'Tokens' ? m.message.offset : -1))).toEqual([
      ...Array(200).keys(),
    ]);
    expect(new Set(decode.recorder.messages.map((m) => m.from))).toEqual(new Set([router.transport.nodeId]));
    // decode does not dial: it answers on the connection the router opened.
    decode.transport.send(router.transport.nodeId, { type: 'AbortAck', rid });
    await router.recorder.untilEvent(/message .* AbortAck/);
    expect(router.recorder.events).toEqual([
      `connected ${decode.transport.nodeId}`,
      `message ${decode.transport.nodeId} AbortAck`,
    ]);
  });

  it('carries a KvChunk payload of several MiB intact, and reports backpressure draining', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false });
    const prefill = await h.node({ dial: true });
    const payload = new Uint8Array(6 * 1024 * 1024).map((_, i) => (i * 7) & 0xff);
    const chunk: Message = {
      type: 'KvChunk',
      rid,
      seq: 0,
      tag: { page: asPageId(1), epoch: asEpoch(2) },
      firstSlot: 0,
      numSlots: 4,
      kvDtype: 'f32',
      checksum: '0123456789abcdef',
      payload,
    };
    prefill.transport.send(decode.transport.nodeId, chunk);
    await prefill.transport.whenDrained(decode.transport.nodeId);
    await decode.recorder.until(() => decode.recorder.messages.length === 1, 'the chunk');
    const got = decode.recorder.messages[0]?.message as Extract<Message, { type: 'KvChunk' }>;
    expect({ ...got, payload: undefined }).toEqual({ ...chunk, payload: undefined });
    expect(Buffer.compare(got.payload, payload)).toBe(0);
  });

  it('hands a node that takes pieces each KvChunk as its header, its payload in pieces and its end; other messages whole, in order', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false, streamed: true });
    const prefill = await h.node({ dial: true });
    const payload = new Uint8Array(6 * 1024 * 1024).map((_, i) => (i * 7) & 0xff);
    const chunk: Message = {
      type: 'KvChunk',
      rid,
      seq: 0,
      tag: { page: asPageId(1), epoch: asEpoch(2) },
      firstSlot: 0,
      numSlots: 4,
      kvDtype: 'f32',
      checksum: '0123456789abcdef',
      payload,
    };
    prefill.transport.send(decode.transport.nodeId, ack(0));
    prefill.transport.send(decode.transport.nodeId, chunk);
    prefill.transport.send(decode.transport.nodeId, ack(1));
    await decode.recorder.until(() => decode.recorder.messages.length === 2, 'the chunk and both messages');
    const from = prefill.transport.nodeId;
    expect(decode.recorder.events).toEqual([
      `connected ${from}`,
      `message ${from} Tokens`,
      `begin ${from} 0`,
      'piece',
      `end ${from}`,
      `message ${from} Tokens`,
    ]);
    const { payload: _, ...fields } = chunk;
    expect(decode.recorder.heads).toEqual([{ ...fields, payloadBytes: payload.length }]);
    expect(Buffer.compare(Buffer.concat(decode.recorder.pieces), payload)).toBe(0);
    if (name === 'tcp') expect(decode.recorder.pieces.length).toBeGreaterThan(1); // as the socket's reads cut it
  });

  it('closes an authenticated connection on a KvChunk with a malformed header, handing on no byte of its payload', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false, streamed: true });
    const pipe = h.raw(decode.transport.nodeId);
    const closed = new Promise<string>((resolve) => pipe.onClose(resolve));
    await authenticate(pipe, 'prefill-9:1');
    const good = encodeFrame({
      type: 'KvChunk',
      rid,
      seq: 0,
      tag: { page: asPageId(1), epoch: asEpoch(2) },
      firstSlot: 0,
      numSlots: 1,
      kvDtype: 'f32',
      checksum: '0123456789abcdef',
      payload: new Uint8Array(64).fill(1),
    });
    const bad = encodeFrame({
      type: 'KvChunk',
      rid,
      seq: 1,
      tag: { page: asPageId(1), epoch: asEpoch(2) },
      firstSlot: 0,
      numSlots: 1,
      kvDtype: 'f32',
      checksum: '0123456789abcdeX',
      payload: new Uint8Array(64).fill(2),
    });
    pipe.write([good, bad]);
    await closed;
    await decode.recorder.untilEvent(/closed prefill-9:1: malformed frame: KvChunk.checksum must be a string matching/);
    expect(decode.recorder.events.map((e) => e.replace(/: .*/, ''))).toEqual([
      'connected prefill-9:1',
      'begin prefill-9:1 0',
      'piece',
      'end prefill-9:1',
      'closed prefill-9:1',
    ]);
    expect(decode.recorder.pieces.every((p) => p.every((b) => b === 1))).toBe(true);
    expect(decode.transport.stats().malformed).toBe(1);
  });

  /**
   * Two good and two bad Reserves (top_k 2^31, a 1025-character stop string) on one connection:
   * what decode delivered, what the router got back, and whether the connection closed.
   */
  async function badReserves(faults: FaultSet): Promise<{
    delivered: string[];
    answered: (string | undefined)[][];
    closed: boolean;
    malformed: number;
  }> {
    h = makeHarness();
    const decode = await h.node({ dial: false, limits: { faults, log: () => undefined } });
    const router = h.client({});
    const reserve = (id: string, sampling: Partial<SamplingParams>): Message => ({
      type: 'Reserve',
      rid: asRequestId(id),
      tenant: asTenantId('alice'),
      promptTokens: 3,
      promptDigest: '0123456789abcdef',
      sampling: samplingParams({ maxTokens: 4, ...sampling }),
      prefillAddress: '127.0.0.1:9',
    });
    router.transport.send(decode.transport.nodeId, reserve('good-1', {}));
    router.transport.send(decode.transport.nodeId, reserve('bad-1', { topK: 2 ** 31 }));
    router.transport.send(decode.transport.nodeId, reserve('bad-2', { stop: ['x'.repeat(1025)] }));
    router.transport.send(decode.transport.nodeId, reserve('good-2', {}));
    const closed = (): boolean => router.recorder.events.some((e) => e.startsWith('closed'));
    await router.recorder.until(
      () => closed() || (router.recorder.messages.length === 2 && decode.recorder.messages.length === 2),
      'two Rejected and both good Reserves, or the close',
    );
    for (let i = 0; i < 100 && closed() && decode.transport.stats().malformed === 0; i++) await sleep(10);
    return {
      delivered: decode.recorder.messages.map((m) => (m.message as { rid: string }).rid),
      answered: router.recorder.messages.map((m) => [
        m.message.type,
        (m.message as { rid: string }).rid,
        (m.message as { code?: string }).code,
      ]),
      closed: closed(),
      malformed: decode.transport.stats().malformed,
    };
  }

  it("answers a Reserve whose fields break one request's rules with Rejected for that rid alone; the connection carries on", async () => {
    expect(await badReserves(NO_FAULTS)).toEqual({
      delivered: ['good-1', 'good-2'],
      answered: [
        ['Rejected', 'bad-1', 'invalid_request'],
        ['Rejected', 'bad-2', 'invalid_request'],
      ],
      closed: false,
      malformed: 0,
    });
  });

  it('negative control: with close-on-bad-reserve the bad Reserve closes the connection the good ones share', async () => {
    const outcome = await badReserves(CLOSE_ON_BAD_RESERVE);
    expect(outcome).toMatchObject({ delivered: ['good-1'], answered: [], closed: true, malformed: 1 });
  });

  it('refuses a handshake frame over 4 KiB from its length prefix, before buffering it, and logs the refusal', async () => {
    h = makeHarness();
    const lines: string[] = [];
    const decode = await h.node({ dial: false, limits: { log: (line) => lines.push(line) } });
    const pipe = h.raw(decode.transport.nodeId);
    pipe.onData(() => undefined); // read (a paused TCP socket would not see the close)
    const closed = new Promise<string>((resolve) => pipe.onClose(resolve));
    const prefix = new Uint8Array(14);
    new DataView(prefix.buffer).setUint32(0, 1024 * 1024); // a 1 MiB "Hello" that never comes
    prefix.set([CODEC_VERSION, 64], 4);
    pipe.write([prefix]);
    await closed;
    for (let i = 0; i < 200 && lines.length === 0; i++) await sleep(10);
    expect(lines[0]).toMatch(
      /refused .* \[malformed\]: malformed frame: frame of 1048580 bytes exceeds the limit of 4096/,
    );
    expect(decode.transport.stats()).toMatchObject({ refused: 1, malformed: 1 });
  });

  /**
   * A stranger's Hello padded to 64 KiB (valid JSON, trailing spaces): 'refused' when the node
   * closed on its length prefix, 'answered' when it buffered all of it and sent its Proof back.
   */
  async function paddedHello(faults: FaultSet): Promise<string> {
    h = makeHarness();
    const decode = await h.node({ dial: false, limits: { faults, log: () => undefined } });
    const pipe = h.raw(decode.transport.nodeId);
    const header = new TextEncoder().encode(
      JSON.stringify({ nodeId: 'stranger-1:1', nonce: 'ab'.repeat(32) }) + ' '.repeat(64 * 1024),
    );
    const frame = new Uint8Array(10 + header.length);
    const view = new DataView(frame.buffer);
    view.setUint32(0, frame.length - 4);
    frame.set([CODEC_VERSION, 64], 4);
    view.setUint32(6, header.length);
    frame.set(header, 10);
    const reader = new FrameReader();
    let frames = 0;
    return new Promise<string>((resolve) => {
      pipe.onData((bytes) => {
        frames += reader.push(bytes).length; // the node's Hello, then its Proof once it took ours
        if (frames >= 2) resolve('answered');
      });
      pipe.onClose((reason) => resolve(`refused (${reason})`));
      pipe.write([frame]);
    }).finally(() => pipe.destroy('test done'));
  }

  it('buffers no handshake frame over 4 KiB, even a well-formed one', async () => {
    expect(await paddedHello(NO_FAULTS)).toMatch(/^refused/);
  });

  it('negative control: with lift-preauth-limits a stranger makes the node buffer a 64 KiB handshake frame', async () => {
    expect(await paddedHello(LIFT_PREAUTH_LIMITS)).toBe('answered');
  });

  /**
   * Six silent strangers from one source against caps of 3 per node and 2 per source: how many
   * the node holds once each has been answered (its Hello) or refused (closed), and the refusals.
   */
  async function silentStrangers(faults: FaultSet) {
    h = makeHarness();
    const lines: string[] = [];
    const decode = await h.node({
      dial: false,
      limits: { maxUnauthenticated: 3, maxUnauthenticatedPerSource: 2, log: (line) => lines.push(line), faults },
    });
    const pipes = Array.from({ length: 6 }, () => h.raw(decode.transport.nodeId));
    const open = new Set(pipes);
    const settled = new Set<Pipe>();
    for (const p of pipes) {
      p.onData(() => settled.add(p));
      p.onClose(() => (open.delete(p), settled.add(p)));
    }
    for (let i = 0; i < 500 && settled.size < pipes.length; i++) await sleep(10);
    return { held: open.size, refusedAtCap: decode.transport.stats().refusedAtCap, lines, decode, open };
  }

  it('caps connections still authenticating, per source and per node; refusals are counted and logged once per class per window', async () => {
    // Two are let in (to wait out their handshake), four refused at once.
    const { held, refusedAtCap, lines, decode, open } = await silentStrangers(NO_FAULTS);
    expect([held, refusedAtCap]).toEqual([2, 4]);
    expect(lines).toHaveLength(1); // four refusals of one class: one line in the window
    expect(lines[0]).toMatch(/\[source-cap\]: 2 connections from it are authenticating/);
    // Once they go, a peer that proves the secret is served.
    for (const p of open) p.destroy('test');
    for (let i = 0; i < 500 && decode.transport.stats().refused < 2; i++) await sleep(10);
    await authenticate(h.raw(decode.transport.nodeId), 'prefill-7:1');
    expect(decode.transport.stats().refusedAtCap).toBe(4);
  });

  it('negative control: with lift-preauth-limits all six silent strangers are held', async () => {
    const { held, refusedAtCap, open } = await silentStrangers(LIFT_PREAUTH_LIMITS);
    for (const p of open) p.destroy('test');
    expect([held, refusedAtCap]).toEqual([6, 0]);
  });

  it('refuses a peer with the wrong secret: nothing is delivered, the dialer sees the close', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false });
    const intruder = h.client({ secret: 'not-the-cluster-secret-at-all!!!' });
    intruder.transport.send(decode.transport.nodeId, { type: 'Abort', rid, reason: 'router' });
    await intruder.recorder.untilEvent(/closed/);
    expect(intruder.recorder.events).toEqual([
      expect.stringMatching(
        new RegExp(
          `closed ${decode.transport.nodeId.replace(/[[\].]/g, '\\$&')}: .*(does not hold the cluster secret|closed by the peer)`,
        ),
      ),
    ]);
    await decode.recorder.until(() => decode.transport.stats().refused === 1, 'the refusal');
    expect(decode.recorder.events).toEqual([]);
  });

  it('closes a connection that sends garbage or a message before authenticating, without crashing', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false });
    for (const bytes of [
      new Uint8Array([0, 0, 0, 12, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9]),
      encodeFrame({ type: 'Ack', rid }),
    ]) {
      const pipe = h.raw(decode.transport.nodeId);
      const closed = new Promise<string>((resolve) => pipe.onClose(resolve));
      pipe.onData(() => {}); // read, so the close is seen
      pipe.write([bytes]);
      await closed;
    }
    await decode.recorder.until(() => decode.transport.stats().refused === 2, 'two refusals');
    expect(decode.recorder.events).toEqual([]);
  });

  it('closePeer ends the connection on both sides; the next send dials a new one', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false });
    const prefill = await h.node({ dial: true });
    const id = decode.transport.nodeId;
    prefill.transport.send(id, ack(0));
    await decode.recorder.untilEvent(/message/);
    decode.transport.closePeer(prefill.transport.nodeId, 'declared dead');
    await decode.recorder.untilEvent(/closed .*: declared dead/);
    await prefill.recorder.untilEvent(/closed/);
    expect(decode.transport.isConnected(prefill.transport.nodeId)).toBe(false);
    prefill.transport.send(id, ack(1));
    await decode.recorder.until(() => decode.recorder.messages.length === 2, 'a message on the new connection');
    expect(decode.recorder.events.map((e) => e.replace(/: .*/, ''))).toEqual([
      `connected ${prefill.transport.nodeId}`,
      `message ${prefill.transport.nodeId} Tokens`,
      `closed ${prefill.transport.nodeId}`,
      `connected ${prefill.transport.nodeId}`,
      `message ${prefill.transport.nodeId} Tokens`,
    ]);
  });

  it('reports closed for closePeer on a peer it has no connection to, and for a dial nobody answers', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false });
    decode.transport.closePeer('nobody:1', 'declared dead');
    await decode.recorder.untilEvent(/closed nobody:1: declared dead/);
    decode.transport.send('nobody:1', ack(0)); // not ours to dial: dropped, counted
    expect(decode.transport.stats().undeliverable).toBe(1);
    const router = h.client({});
    const gone = await h.node({ dial: false });
    const goneId = gone.transport.nodeId;
    await gone.transport.close();
    router.transport.send(goneId, ack(0));
    await router.recorder.untilEvent(/closed/);
    expect(router.recorder.events).toHaveLength(1);
  });
});

describe('tcp transport: read buffers before authentication', () => {
  /**
   * MiB of ArrayBuffers that 100 silent strangers cost a listener (caps raised past 100, so the
   * buffers are measured, not the caps), once each has been answered with the node's Hello.
   */
  async function arrayBufferMiBFor100Strangers(faults: FaultSet): Promise<number> {
    const node = await TcpTransport.listen({
      secret: SECRET,
      handlers: new Recorder().handlers,
      dial: false,
      maxUnauthenticated: 200,
      maxUnauthenticatedPerSource: 200,
      faults,
      log: () => undefined,
    });
    const { host, port } = parseAddress(node.nodeId);
    const before = process.memoryUsage().arrayBuffers;
    const sockets = Array.from({ length: 100 }, () => connect({ host, port }));
    await Promise.all(
      sockets.map((s) => new Promise((resolve) => (s.once('data', resolve), s.once('error', resolve)))),
    );
    const grown = (process.memoryUsage().arrayBuffers - before) / 2 ** 20;
    for (const s of sockets) s.destroy();
    await node.close();
    return grown;
  }

  it('gives a stranger a 4 KiB read buffer, not 1 MiB: 100 silent connections cost well under 100 MiB', async () => {
    expect(await arrayBufferMiBFor100Strangers(NO_FAULTS)).toBeLessThan(16);
  });

  it('negative control: with lift-preauth-limits each of them holds a 1 MiB read buffer from the start', async () => {
    expect(await arrayBufferMiBFor100Strangers(LIFT_PREAUTH_LIMITS)).toBeGreaterThan(50); // 100 MiB less what a collection freed meanwhile
  });
});
