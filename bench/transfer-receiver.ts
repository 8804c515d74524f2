// The receiving end of bench/transfer.ts, in its own process (forked by it) so that sender and
// receiver run in parallel, as a prefill and a decode node do. Over IPC it is told what to
// receive ({ mode, totalBytes, secret }), answers { port } once it listens, and { doneAt, bad }
// when every byte has arrived (doneAt: ms since the epoch, sub-ms). Modes:
//   raw       a plain socket: count bytes
//   hashed    a plain socket, every byte hashed with xxh64 as it arrives (no framing, no copy):
//             the floor for any receiver that verifies a checksum
//   protocol  an authenticated TcpTransport: decode each KvChunk and verify its xxh64 checksum,
//             as decode's checkChunk does
import { createServer, type AddressInfo } from 'node:net';
import { Xxh64 } from '@node-rs/xxhash';
import { chunkChecksum, TcpTransport, type Message } from '../src/transfer/index.js';

interface Job {
  readonly mode: 'raw' | 'hashed' | 'protocol';
  readonly totalBytes: number;
  readonly secret: string;
}

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
  const hash = job.mode === 'hashed' ? new Xxh64(1n) : undefined;
  const server = createServer((socket) => {
    cpuFrom = process.cpuUsage();
    socket.on('data', (b: Buffer) => {
      hash?.update(b);
      received += b.length;
      if (received >= job.totalBytes) {
        reply({ doneAt: now(), bad: 0, cpuMs: cpuMs(cpuFrom) });
        socket.destroy();
        server.close();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  reply({ port: (server.address() as AddressInfo).port });
}

async function protocol(job: Job): Promise<void> {
  let received = 0;
  let bad = 0;
  const transport = await TcpTransport.listen({
    secret: job.secret,
    dial: false,
    handlers: {
      connected: () => (cpuFrom = process.cpuUsage()),
      closed: () => undefined,
      message: (_from: string, m: Message) => {
        if (m.type !== 'KvChunk') return;
        if (chunkChecksum(m, m.payload) !== m.checksum) bad++;
        received += m.payload.length;
        if (received >= job.totalBytes) {
          reply({ doneAt: now(), bad, cpuMs: cpuMs(cpuFrom) });
          void transport.close();
        }
      },
    },
  });
  reply({ port: Number(transport.nodeId.split(':')[1]) });
}

process.once('message', (job: Job) => void (job.mode === 'protocol' ? protocol(job) : raw(job)));
// The parent disconnects when it has what it needs: exit (cleanly, so a --cpu-prof is written).
process.once('disconnect', () => process.exit(0));
