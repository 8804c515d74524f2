// The limits a listening node keeps before a peer has authenticated (caps per node and per source
// that close the oldest stranger, a 4 KiB read buffer and handshake bound, rate-limited refusal
// logs), against memory and TCP, and that an authenticated peer never pays for them: a peer that
// dials into a room strangers from its address fill gets in, and one already in is never counted
// or closed. Negative controls: `lift-preauth-limits`, `refuse-at-preauth-cap`, `evict-authenticated-peers`.
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS } from '../../core/index.js';
import { Handshake } from '../auth.js';
import { CODEC_VERSION, FrameReader } from '../codec.js';
import type { Pipe } from './pipe.js';
import { parseAddress, TcpTransport } from './tcp.js';
import {
  authenticate,
  LIFT_PREAUTH_LIMITS,
  memoryHarness,
  ack,
  Recorder,
  SECRET,
  sleep,
  tcpHarness,
  type Harness,
} from './testing/harness.js';

describe.each([
  ['memory', memoryHarness],
  ['tcp', tcpHarness],
] as const)('%s transport', (name, makeHarness) => {
  let h: Harness;
  afterEach(async () => {
    await h.cleanup();
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

  /** A stranger's pipe: it says Hello when `greeting` (a valid frame, no secret needed), never proves anything. */
  function stranger(target: string, greeting: boolean, n: number): Pipe {
    const pipe = h.raw(target);
    if (greeting)
      pipe.write([
        new Handshake({
          secret: 'not-the-cluster-secret-0123456789',
          nodeId: `stranger-${n}:1`,
          role: 'dialer',
          nonce: randomBytes(32),
        }).start(),
      ]);
    return pipe;
  }

  /**
   * Six strangers from one source, one after another, against caps of 3 per node and 2 per source:
   * which of them the node closed (by index) once it settled, the refusals counted, the log lines.
   */
  async function sixStrangers(faults: FaultSet, expectClosed: number) {
    h = makeHarness();
    const lines: string[] = [];
    const decode = await h.node({
      dial: false,
      limits: { maxUnauthenticated: 3, maxUnauthenticatedPerSource: 2, log: (line) => lines.push(line), faults },
    });
    const closed: number[] = [];
    const pipes: Pipe[] = [];
    for (let i = 0; i < 6; i++) {
      const p = stranger(decode.transport.nodeId, false, i);
      pipes.push(p);
      // Each is answered (the node's Hello) or refused before the next comes.
      await new Promise<void>((resolve) => {
        p.onData(() => resolve());
        p.onClose(() => (closed.push(i), resolve()));
      });
    }
    // Settled: `expectClosed` closed at the caps (and a few more event-loop turns for any beyond).
    for (let i = 0; i < 500 && closed.length < expectClosed; i++) await sleep(10);
    await sleep(50);
    const open = pipes.filter((_, i) => !closed.includes(i));
    return { closed: closed.sort(), refusedAtCap: decode.transport.stats().refusedAtCap, lines, decode, open };
  }

  it('caps connections still authenticating, per source and per node, by closing the oldest; counted and logged once per class per window', async () => {
    const { closed, refusedAtCap, lines, decode, open } = await sixStrangers(NO_FAULTS, 4);
    expect([closed, refusedAtCap]).toEqual([[0, 1, 2, 3], 4]); // the newest two wait out their handshake
    expect(lines).toHaveLength(1); // four of one class: one line in the window
    expect(lines[0]).toMatch(/\[source-cap\]: closed its oldest: 2 connections from it are authenticating/);
    for (const p of open) p.destroy('test');
    await authenticate(h.raw(decode.transport.nodeId), 'prefill-7:1');
    expect(decode.transport.stats().refusedAtCap).toBe(4);
  });

  it('negative control: with refuse-at-preauth-cap the newest four are refused instead', async () => {
    const { closed, refusedAtCap, open } = await sixStrangers(new FaultSet(['refuse-at-preauth-cap']), 4);
    for (const p of open) p.destroy('test');
    expect([closed, refusedAtCap]).toEqual([[2, 3, 4, 5], 4]);
  });

  it('negative control: with lift-preauth-limits all six silent strangers are held', async () => {
    const { closed, refusedAtCap, open } = await sixStrangers(LIFT_PREAUTH_LIMITS, 0);
    for (const p of open) p.destroy('test');
    expect([closed, refusedAtCap]).toEqual([[], 0]);
  });

  /**
   * A router that dials a node whose room strangers from its own address fill (six silent ones
   * against caps of 3 and 2): whether its first message arrives, or its connection closes.
   */
  async function dialIntoFullRoom(faults: FaultSet): Promise<string> {
    h = makeHarness();
    const decode = await h.node({
      dial: false,
      limits: { maxUnauthenticated: 3, maxUnauthenticatedPerSource: 2, log: () => undefined, faults },
    });
    const held = Array.from({ length: 6 }, (_, i) => stranger(decode.transport.nodeId, false, i));
    for (const p of held) p.onData(() => undefined);
    for (let i = 0; i < 500 && decode.transport.stats().refusedAtCap < 4; i++) await sleep(10);
    const router = h.client({});
    router.transport.send(decode.transport.nodeId, ack(1));
    await Promise.race([
      decode.recorder.until(() => decode.recorder.messages.length === 1, 'the message'),
      router.recorder.untilEvent(/^closed/),
    ]);
    for (const p of held) p.destroy('test');
    return decode.recorder.messages.length === 1 ? 'delivered' : (router.recorder.events.at(-1) ?? 'nothing');
  }

  it('lets a peer in that dials while strangers from its address fill the room', async () => {
    expect(await dialIntoFullRoom(NO_FAULTS)).toBe('delivered');
  });

  it('negative control: with refuse-at-preauth-cap that peer is refused', async () => {
    expect(await dialIntoFullRoom(new FaultSet(['refuse-at-preauth-cap']))).toMatch(/^closed /);
  });

  /**
   * An authenticated router, then six strangers from its address that say Hello and never prove
   * (caps 3 and 2): how many strangers the node holds, and whether the router's next message arrives.
   */
  async function strangersAfterPeer(faults: FaultSet): Promise<{ strangersHeld: number; second: string }> {
    h = makeHarness();
    const decode = await h.node({
      dial: false,
      limits: { maxUnauthenticated: 3, maxUnauthenticatedPerSource: 2, log: () => undefined, faults },
    });
    const router = h.client({});
    router.transport.send(decode.transport.nodeId, ack(1));
    await decode.recorder.until(() => decode.recorder.messages.length === 1, 'the first message');
    // One at a time, each once the node read its Hello (it answered with its Proof: two frames back).
    const open = new Set<Pipe>();
    let strangersClosed = 0;
    for (let i = 0; i < 6; i++) {
      const p = stranger(decode.transport.nodeId, true, i);
      open.add(p);
      const reader = new FrameReader();
      let frames = 0;
      await new Promise<void>((resolve) => {
        p.onData((bytes) => {
          frames += reader.push(bytes).length;
          if (frames >= 2) resolve();
        });
        p.onClose(() => (open.delete(p), strangersClosed++, resolve()));
      });
    }
    // Settled: every close the node counted at a cap has reached its stranger (or the router).
    const routerClosed = (): number => (router.recorder.events.some((e) => e.startsWith('closed')) ? 1 : 0);
    for (let i = 0; i < 500; i++) {
      const atCap = decode.transport.stats().refusedAtCap;
      if (atCap >= 4 && strangersClosed + routerClosed() === atCap) break;
      await sleep(10);
    }
    router.transport.send(decode.transport.nodeId, ack(2));
    await Promise.race([
      decode.recorder.until(() => decode.recorder.messages.length === 2, 'the second message'),
      router.recorder.untilEvent(/^closed/),
    ]);
    const strangersHeld = open.size;
    for (const p of open) p.destroy('test');
    return {
      strangersHeld,
      second: decode.recorder.messages.length === 2 ? 'delivered' : (router.recorder.events.at(-1) ?? 'nothing'),
    };
  }

  it("never counts or closes an authenticated peer's connection for a cap", async () => {
    expect(await strangersAfterPeer(NO_FAULTS)).toEqual({ strangersHeld: 2, second: 'delivered' });
  });

  it('negative control: with evict-authenticated-peers the peer takes a place and is closed to make room', async () => {
    const { strangersHeld, second } = await strangersAfterPeer(new FaultSet(['evict-authenticated-peers']));
    expect({ strangersHeld, second }).toEqual({ strangersHeld: 2, second: expect.stringMatching(/^closed /) });
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
