// KV transfer benchmark (`npm run bench:transfer`): GB/s of KvChunk frames between two
// authenticated TcpTransports on loopback (xxh64 checksum computed by the sender and verified by
// the receiver, as in the protocol), beside a raw loopback socket pushing the same bytes in the
// same run, and the checksum alone. Prints a table and writes bench/results/transfer-<time>.json.
// Asserts nothing about speed (a benchmark, not a test). The page-check cost per decode step is
// measured by bench/decode.ts.
//
//   node --import ./bench/lib/register-ts.mjs bench/transfer.ts [--quick] [--mib N] [--chunk-kib N]
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer, connect, type AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { asEpoch, asPageId, asRequestId } from '../src/core/index.js';
import { chunkChecksum, TcpTransport, type Message } from '../src/transfer/index.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const TOTAL_MIB = Number(flag('--mib') ?? (quick ? 256 : 1024));
/** A page of a Llama-3-8B-like model (32 layers, 8 KV heads of 128, f32, 16 slots) is 4 MiB; 1 MiB by default. */
const CHUNK_BYTES = Number(flag('--chunk-kib') ?? 1024) * 1024;
const NUM_CHUNKS = Math.ceil((TOTAL_MIB * 1024 * 1024) / CHUNK_BYTES);
const TOTAL_BYTES = NUM_CHUNKS * CHUNK_BYTES;
const SECRET = 'bench-transfer-cluster-secret-0123456789';
const HIGH_WATER = 16 * 1024 * 1024;

const payload = new Uint8Array(CHUNK_BYTES).map((_, i) => (i * 131) & 0xff);
const gbps = (bytes: number, ms: number): number => bytes / 1e9 / (ms / 1000);

async function raw(): Promise<number> {
  let received = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const server = createServer((socket) => {
    socket.on('data', (b: Buffer) => {
      received += b.length;
      if (received >= TOTAL_BYTES) done();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = connect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1' });
  socket.setNoDelay(true);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const start = performance.now();
  for (let i = 0; i < NUM_CHUNKS; i++) {
    if (!socket.write(payload)) await new Promise<void>((resolve) => socket.once('drain', resolve));
  }
  await finished;
  const ms = performance.now() - start;
  socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return ms;
}

async function protocol(): Promise<{ ms: number; bad: number }> {
  let received = 0;
  let bad = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const decode = await TcpTransport.listen({
    secret: SECRET,
    dial: false,
    handlers: {
      connected: () => {},
      closed: () => {},
      message: (_from: string, m: Message) => {
        if (m.type !== 'KvChunk') return;
        if (chunkChecksum(m, m.payload) !== m.checksum) bad++;
        received += m.payload.length;
        if (received >= TOTAL_BYTES) done();
      },
    },
  });
  let connected!: () => void;
  const up = new Promise<void>((resolve) => (connected = resolve));
  const prefill = await TcpTransport.listen({ secret: SECRET, dial: true, handlers: { connected: () => connected(), closed: () => {}, message: () => {} } });
  const rid = asRequestId('bench');
  prefill.send(decode.nodeId, { type: 'Ack', rid }); // authenticate before timing
  await up;
  const start = performance.now();
  for (let seq = 0; seq < NUM_CHUNKS; seq++) {
    const header = { rid, seq, tag: { page: asPageId(seq % 1000), epoch: asEpoch(seq + 1) }, firstSlot: 0, numSlots: 16 };
    prefill.send(decode.nodeId, { type: 'KvChunk', ...header, checksum: chunkChecksum(header, payload), payload });
    if (prefill.bufferedBytes(decode.nodeId) > HIGH_WATER) await prefill.whenDrained(decode.nodeId);
  }
  await finished;
  const ms = performance.now() - start;
  await Promise.all([prefill.close(), decode.close()]);
  return { ms, bad };
}

function checksumOnly(): number {
  const header = { rid: asRequestId('bench'), seq: 0, tag: { page: asPageId(0), epoch: asEpoch(1) }, firstSlot: 0, numSlots: 16 };
  const start = performance.now();
  for (let i = 0; i < NUM_CHUNKS; i++) chunkChecksum({ ...header, seq: i }, payload);
  return performance.now() - start;
}

async function main(): Promise<void> {
  console.log(`KV transfer on loopback: ${TOTAL_MIB} MiB in ${NUM_CHUNKS} chunks of ${CHUNK_BYTES / 1024} KiB; ${cpus()[0]?.model ?? 'cpu'} x${cpus().length}`);
  await raw(); // warm-up
  await protocol();
  const rows: { what: string; ms: number; gbps: number }[] = [];
  for (let round = 0; round < 2; round++) {
    const rawMs = await raw();
    const { ms, bad } = await protocol();
    if (bad > 0) throw new Error(`${bad} chunks failed their checksum on a clean loopback`);
    rows.push({ what: `raw socket (round ${round + 1})`, ms: rawMs, gbps: gbps(TOTAL_BYTES, rawMs) }, { what: `KvChunk + xxh64 both ends (round ${round + 1})`, ms, gbps: gbps(TOTAL_BYTES, ms) });
  }
  const sumMs = checksumOnly();
  rows.push({ what: 'xxh64 checksum alone (one end)', ms: sumMs, gbps: gbps(TOTAL_BYTES, sumMs) });
  for (const r of rows) console.log(`${r.what.padEnd(42)} ${r.ms.toFixed(0).padStart(7)} ms  ${r.gbps.toFixed(2).padStart(6)} GB/s`);
  const best = (prefix: string) => Math.max(...rows.filter((r) => r.what.startsWith(prefix)).map((r) => r.gbps));
  const ratio = best('KvChunk') / best('raw');
  console.log(`protocol / raw = ${ratio.toFixed(2)} (target >= 0.8)`);
  await mkdir(new URL('./results/', import.meta.url), { recursive: true });
  const file = new URL(`./results/transfer-${new Date().toISOString().replace(/[:.]/g, '-')}.json`, import.meta.url);
  await writeFile(file, JSON.stringify({ totalMiB: TOTAL_MIB, chunkBytes: CHUNK_BYTES, rows, ratio }, null, 2));
  console.log(`wrote ${file.pathname}`);
}

await main();
