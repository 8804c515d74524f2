// The receiving end of bench/transfer.ts, in its own process (forked by it) so that sender and
// receiver run in parallel, as a prefill and a decode node do. Over IPC it is told what to
// receive ({ mode, totalBytes, secret, shape }), answers { port } once it listens, and
// { doneAt, bad, cpuMs } when every byte has arrived (doneAt: ms since the epoch, sub-ms). Modes:
//   raw       a plain socket ('data' events, a fresh buffer per read): count bytes
//   reused    a plain socket reading into one reused buffer (onread, as the TCP transport reads):
//             count bytes
//   hashed    a plain socket ('data' events), every byte hashed with xxh64 as it arrives (no
//             framing, no copy)
//   landed    a plain socket reading into one reused buffer, every byte hashed with xxh64 and
//             copied into a pool-sized buffer as it arrives, with no framing and no checks: the
//             floor for a receiver that verifies and lands every byte the way decode does
//   protocol  what a decode node does: an authenticated TcpTransport whose KvChunks go, as they
//             come off the wire, to a real DecodeMachine over a PagePool of `shape` (header
//             checks, payload landed in its page piece by piece, xxh64 verified, stamped;
//             KvDone verified from the stamps, Ack); the pages go back once a transfer verifies
import { createServer, Socket, type AddressInfo, type OnReadOpts, type SocketConstructorOpts } from 'node:net';
import { Xxh64 } from '@node-rs/xxhash';
import { NO_FAULTS } from '../src/core/index.js';
import { elementsPerPage, PagePool, type KvShape } from '../src/pages/index.js';
import {
  DecodeMachine,
  LedgerDecodeHost,
  MachineDriver,
  TcpTransport,
  type DecodeEffect,
  type DecodeInput,
} from '../src/transfer/index.js';

interface Job {
  readonly mode: 'raw' | 'reused' | 'hashed' | 'landed' | 'protocol';
  readonly totalBytes: number;
  readonly secret: string;
  /** protocol: the decode pool, and how many transfers make up totalBytes. */
  readonly shape: KvShape;
  readonly numTransfers: number;
}

/** The model fingerprint the sender's KvDone carries (bench/transfer.ts; no model runs here). */
const BENCH_MODEL = '5eed5eed5eed5eed';
const now = (): number => performance.timeOrigin + performance.now();
/** CPU ms (user + system) this process spent since `from`. */
const cpuMs = (from: NodeJS.CpuUsage): number => {
  const u = process.cpuUsage(from);
  return (u.user + u.system) / 1000;
};
let cpuFrom = process.cpuUsage();
const reply = (message: unknown): void => void process.send?.(message);

async function raw(job: Job): Promise<void> {
  let received = 0;
  const hash = job.mode === 'hashed' || job.mode === 'landed' ? new Xxh64(1n) : undefined;
  const reuse = job.mode === 'reused' || job.mode === 'landed';
  const pool =
    job.mode === 'landed' ? new Uint8Array(job.shape.numPages * elementsPerPage(job.shape) * 4).fill(0) : undefined; // as big as decode's, touched
  let at = 0;
  const server = createServer({ pauseOnConnect: reuse }, (accepted) => {
    cpuFrom = process.cpuUsage();
    const onBytes = (b: Uint8Array): void => {
      hash?.update(b);
      if (pool !== undefined) {
        if (at + b.length > pool.length) at = 0;
        pool.set(b, at);
        at += b.length;
      }
      received += b.length;
      if (received >= job.totalBytes) {
        reply({ doneAt: now(), bad: 0, cpuMs: cpuMs(cpuFrom) });
        socket.destroy();
        server.close();
      }
    };
    let socket = accepted;
    if (reuse) {
      // As src/transfer/transports/tcp.ts reads an accepted socket: its handle on a socket made with `onread`.
      const internals = accepted as unknown as { _handle: unknown };
      const handle = internals._handle;
      internals._handle = null;
      accepted.destroy();
      const onread: OnReadOpts = {
        buffer: new Uint8Array(1024 * 1024),
        callback: (n, buffer) => (onBytes(buffer.subarray(0, n)), true),
      };
      socket = new Socket({ handle, readable: true, writable: true, onread } as SocketConstructorOpts);
    } else {
      socket.on('data', onBytes);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  reply({ port: (server.address() as AddressInfo).port });
}

async function protocol(job: Job): Promise<void> {
  const pool = PagePool.create(job.shape);
  pool.kv.data.fill(0); // touch every page now, as a running decode node has: no first-write page faults in the timing
  const host = new LedgerDecodeHost({ pool, model: BENCH_MODEL, contextLength: 1 << 30, faults: NO_FAULTS });
  const machine = new DecodeMachine({ node: 'bench-decode', host, timeouts: { kvStartMs: 60_000, frameMs: 60_000 } });
  let verified = 0;
  let transport!: TcpTransport;
  const driver: MachineDriver<DecodeInput, DecodeEffect> = new MachineDriver<DecodeInput, DecodeEffect>(
    machine,
    (effect) => {
      switch (effect.kind) {
        case 'send':
          return transport.send(effect.to, effect.message);
        case 'closePeer':
          return transport.closePeer(effect.peer, effect.reason);
        case 'startDecoding':
          // Verified: a decoder would read the pages now. Give them back for the next transfer.
          pool.ledger.free(effect.tags, effect.owner);
          driver.handle({ kind: 'decodeFinished', rid: effect.rid, finishReason: 'length' });
          if (++verified === job.numTransfers) {
            const s = machine.stats();
            reply({
              doneAt: now(),
              bad: s.checksumFailures + s.transfersFailed + s.framesDropped,
              cpuMs: cpuMs(cpuFrom),
            });
          }
          return;
        case 'stopDecoding':
          return;
        default:
          return effect satisfies never;
      }
    },
  );
  transport = await TcpTransport.listen({
    secret: job.secret,
    dial: false,
    handlers: {
      ...driver.handlers(),
      connected: (peer) => ((cpuFrom = process.cpuUsage()), driver.handle({ kind: 'connected', peer })),
      chunks: driver.chunkHandlers(),
    },
  });
  reply({ port: Number(transport.nodeId.split(':')[1]) });
}

process.once('message', (job: Job) => void (job.mode === 'protocol' ? protocol(job) : raw(job)));
// The parent disconnects when it has what it needs: exit (cleanly, so a --cpu-prof is written).
process.once('disconnect', () => process.exit(0));
