// The limits a listening node keeps before a peer has authenticated (caps per node and per source,
// a 4 KiB read buffer and handshake bound, rate-limited refusal logs), against memory and TCP, each
// with its negative control `lift-preauth-limits`.
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS } from '../../core/index.js';
import { CODEC_VERSION, FrameReader } from '../codec.js';
import type { Pipe } from './pipe.js';
import { parseAddress, TcpTransport } from './tcp.js';
import {
  authenticate,
  LIFT_PREAUTH_LIMITS,
  memoryHarness,
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
