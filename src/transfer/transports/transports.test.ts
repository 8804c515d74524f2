// One suite, run against every transport (memory and TCP): what a worker or router relies on.
// The limits before authentication have their own file (transports-preauth.test.ts).
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
import { encodeFrame } from '../codec.js';
import type { Message } from '../messages.js';
import {
  ack,
  authenticate,
  CLOSE_ON_BAD_RESERVE,
  memoryHarness,
  rid,
  sleep,
  tcpHarness,
  type Harness,
} from './testing/harness.js';

type KvChunk = Extract<Message, { type: 'KvChunk' }>;

/** A KvChunk of 4 slots of page 1 (epoch 2) carrying `payload`, `fields` over the rest. */
function kvChunk(payload: Uint8Array, fields: Partial<KvChunk> = {}): KvChunk {
  return {
    type: 'KvChunk',
    rid,
    seq: 0,
    tag: { page: asPageId(1), epoch: asEpoch(2) },
    firstSlot: 0,
    numSlots: 4,
    kvDtype: 'f32',
    checksum: '0123456789abcdef',
    payload,
    ...fields,
  };
}

/** A KvChunk with a 6 MiB payload of a known pattern. */
const bigChunk = (): KvChunk => kvChunk(new Uint8Array(6 * 1024 * 1024).map((_, i) => (i * 7) & 0xff));

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
    const chunk = bigChunk();
    const { payload } = chunk;
    prefill.transport.send(decode.transport.nodeId, chunk);
    await prefill.transport.whenDrained(decode.transport.nodeId);
    await decode.recorder.until(() => decode.recorder.messages.length === 1, 'the chunk');
    const got = decode.recorder.messages[0]?.message as KvChunk;
    expect({ ...got, payload: undefined }).toEqual({ ...chunk, payload: undefined });
    expect(Buffer.compare(got.payload, payload)).toBe(0);
  });

  it('hands a node that takes pieces each KvChunk as its header, its payload in pieces and its end; other messages whole, in order', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false, streamed: true });
    const prefill = await h.node({ dial: true });
    const chunk = bigChunk();
    const { payload } = chunk;
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
    const good = encodeFrame(kvChunk(new Uint8Array(64).fill(1), { numSlots: 1 }));
    const bad = encodeFrame(kvChunk(new Uint8Array(64).fill(2), { seq: 1, numSlots: 1, checksum: '0123456789abcdeX' }));
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

  it('drops a message to a peer that left and is no address to dial (a router), reports it closed, and serves on', async () => {
    h = makeHarness();
    const decode = await h.node({ dial: false });
    const prefill = await h.node({ dial: true });
    expect(() => prefill.transport.send('router-vm-1', ack(0))).not.toThrow();
    await prefill.recorder.untilEvent(/closed router-vm-1/);
    prefill.transport.send(decode.transport.nodeId, ack(1));
    await decode.recorder.untilEvent(/message/);
    expect(decode.recorder.messages).toHaveLength(1);
  });
});
