// KV transfer benchmark (`npm run bench:transfer`): GB/s of KvChunk frames from a sender to a
// receiver in another process (bench/transfer-receiver.ts, forked), over an authenticated
// TcpTransport on loopback with the xxh64 checksum computed by the sender and verified by the
// receiver, as in the protocol; beside a raw loopback socket pushing the same bytes between the
// same two processes, in the same run; a raw socket whose receiver hashes every byte as it
// arrives (the floor for any checksummed receive: no framing, no copy); and the checksum alone.
// Sender and receiver run in parallel, as a prefill and a decode node do; each row also gives
// the CPU time of both ends (less noisy than wall time on a shared machine). Prints a table and
// writes bench/results/transfer-<time>.json. Asserts nothing about speed (a benchmark, not a
// test). The page-check cost per decode step is measured by bench/decode.ts.
//
//   node --import ./bench/lib/register-ts.mjs bench/transfer.ts [--quick] [--mib N] [--chunk-kib N] [--rounds N]
//   BENCH_PROFILE_DIR=dir   write a --cpu-prof of every receiver process there
import { fork, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { asEpoch, asPageId, asRequestId } from '../src/core/index.js';
import { chunkChecksum, TcpTransport } from '../src/transfer/index.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const TOTAL_MIB = Number(flag('--mib') ?? (quick ? 256 : 1024));
/** A page of a Llama-3-8B-like model (32 layers, 8 KV heads of 128, f32, 16 slots) is 4 MiB; 1 MiB by default. */
const CHUNK_BYTES = Number(flag('--chunk-kib') ?? 1024) * 1024;
const ROUNDS = Number(flag('--rounds') ?? 3);
const NUM_CHUNKS = Math.ceil((TOTAL_MIB * 1024 * 1024) / CHUNK_BYTES);
const TOTAL_BYTES = NUM_CHUNKS * CHUNK_BYTES;
const SECRET = 'bench-transfer-cluster-secret-0123456789';
const HIGH_WATER = 16 * 1024 * 1024;
const RECEIVER = fileURLToPath(new URL('./transfer-receiver.ts', import.meta.url));

const payload = new Uint8Array(CHUNK_BYTES).map((_, i) => (i * 131) & 0xff);
const gbps = (bytes: number, ms: number): number => bytes / 1e9 / (ms / 1000);
const now = (): number => performance.timeOrigin + performance.now();

/** A receiver process for one run: resolves its port, then (via `done`) when it has every byte. */
interface Done {
  readonly doneAt: number;
  readonly bad: number;
  /** CPU the receiver spent from its connection to the last byte. */
  readonly cpuMs: number;
}

async function receiver(mode: 'raw' | 'hashed' | 'protocol'): Promise<{ port: number; done: Promise<Done>; child: ChildProcess }> {
  const profile = process.env['BENCH_PROFILE_DIR'];
  const execArgv = profile === undefined ? process.execArgv : [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${profile}`];
  const child = fork(RECEIVER, [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = new Promise<number>((resolve) => child.once('message', (m: { port: number }) => resolve(m.port)));
  child.send({ mode, totalBytes: TOTAL_BYTES, secret: SECRET });
  const p = await port;
  const done = new Promise<Done>((resolve) => child.once('message', (m: Done) => resolve(m)));
  return { port: p, done, child };
}

interface Run {
  readonly ms: number;
  readonly bad: number;
  readonly senderCpuMs: number;
  readonly receiverCpuMs: number;
}

const cpuMs = (from: NodeJS.CpuUsage): number => {
  const u = process.cpuUsage(from);
  return (u.user + u.system) / 1000;
};

async function raw(mode: 'raw' | 'hashed' = 'raw'): Promise<Run> {
  const r = await receiver(mode);
  const socket = connect({ port: r.port, host: '127.0.0.1' });
  socket.setNoDelay(true);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const start = now();
  const cpu = process.cpuUsage();
  for (let i = 0; i < NUM_CHUNKS; i++) {
    if (!socket.write(payload)) await new Promise<void>((resolve) => socket.once('drain', resolve));
  }
  const done = await r.done;
  const senderCpuMs = cpuMs(cpu);
  socket.destroy();
  r.child.disconnect();
  return { ms: done.doneAt - start, bad: 0, senderCpuMs, receiverCpuMs: done.cpuMs };
}

async function protocol(): Promise<Run> {
  const r = await receiver('protocol');
  let connected!: () => void;
  const up = new Promise<void>((resolve) => (connected = resolve));
  const sender = TcpTransport.client({ nodeId: 'bench-prefill', secret: SECRET, dial: true, handlers: { connected: () => connected(), closed: () => undefined, message: () => undefined } });
  const peer = `127.0.0.1:${r.port}`;
  const rid = asRequestId('bench');
  sender.send(peer, { type: 'Ack', rid }); // authenticate before timing
  await up;
  const start = now();
  const cpu = process.cpuUsage();
  for (let seq = 0; seq < NUM_CHUNKS; seq++) {
    const header = { rid, seq, tag: { page: asPageId(seq % 1000), epoch: asEpoch(seq + 1) }, firstSlot: 0, numSlots: 16 };
    sender.send(peer, { type: 'KvChunk', ...header, checksum: chunkChecksum(header, payload), payload });
    if (sender.bufferedBytes(peer) > HIGH_WATER) await sender.whenDrained(peer);
  }
  const done = await r.done;
  const senderCpuMs = cpuMs(cpu);
  await sender.close();
  r.child.disconnect();
  return { ms: done.doneAt - start, bad: done.bad, senderCpuMs, receiverCpuMs: done.cpuMs };
}

function checksumOnly(): number {
  const header = { rid: asRequestId('bench'), seq: 0, tag: { page: asPageId(0), epoch: asEpoch(1) }, firstSlot: 0, numSlots: 16 };
  const start = performance.now();
  for (let i = 0; i < NUM_CHUNKS; i++) chunkChecksum({ ...header, seq: i }, payload);
  return performance.now() - start;
}

async function main(): Promise<void> {
  console.log(`KV transfer on loopback, receiver in another process: ${TOTAL_MIB} MiB in ${NUM_CHUNKS} chunks of ${CHUNK_BYTES / 1024} KiB; ${cpus()[0]?.model ?? 'cpu'} x${cpus().length}`);
  await raw(); // warm-up
  await protocol();
  const rows: { what: string; ms: number; gbps: number; senderCpuMs?: number; receiverCpuMs?: number }[] = [];
  const row = (what: string, r: Run) => ({ what, ms: r.ms, gbps: gbps(TOTAL_BYTES, r.ms), senderCpuMs: r.senderCpuMs, receiverCpuMs: r.receiverCpuMs });
  for (let round = 0; round < ROUNDS; round++) {
    const rawRun = await raw();
    const run = await protocol();
    if (run.bad > 0) throw new Error(`${run.bad} chunks failed their checksum on a clean loopback`);
    const hashed = await raw('hashed');
    rows.push(row(`raw socket (round ${round + 1})`, rawRun), row(`KvChunk + xxh64 both ends (round ${round + 1})`, run), row(`raw + xxh64 on arrival, no framing (round ${round + 1})`, hashed));
  }
  const sumMs = checksumOnly();
  rows.push({ what: 'xxh64 checksum alone (one end)', ms: sumMs, gbps: gbps(TOTAL_BYTES, sumMs) });
  console.log(`${''.padEnd(42)} ${'wall'.padStart(7)}     ${'GB/s'.padStart(6)}  ${'CPU: sender'.padStart(12)} ${'receiver'.padStart(9)}`);
  for (const r of rows) {
    const cpu = r.senderCpuMs === undefined ? '' : `  ${r.senderCpuMs.toFixed(0).padStart(9)} ms ${(r.receiverCpuMs ?? 0).toFixed(0).padStart(6)} ms`;
    console.log(`${r.what.padEnd(42)} ${r.ms.toFixed(0).padStart(7)} ms  ${r.gbps.toFixed(2).padStart(6)}${cpu}`);
  }
  const median = (prefix: string): number => {
    const xs = rows.filter((r) => r.what.startsWith(prefix)).map((r) => r.gbps).sort((a, b) => a - b);
    return xs[Math.floor(xs.length / 2)] as number;
  };
  const ratio = median('KvChunk') / median('raw socket');
  const floor = median('raw + xxh64') / median('raw socket');
  const perRound = rows.filter((r) => r.what.startsWith('KvChunk')).map((r, i) => r.gbps / (rows.filter((x) => x.what.startsWith('raw socket'))[i]?.gbps ?? Number.NaN));
  console.log(`protocol / raw (medians) = ${ratio.toFixed(2)} (target >= 0.8); per round: ${perRound.map((x) => x.toFixed(2)).join(', ')}`);
  console.log(`hashing every byte on arrival, without framing or a copy / raw (medians) = ${floor.toFixed(2)}: the most a checksummed receiver can reach here`);
  await mkdir(new URL('./results/', import.meta.url), { recursive: true });
  const file = new URL(`./results/transfer-${new Date().toISOString().replace(/[:.]/g, '-')}.json`, import.meta.url);
  await writeFile(file, JSON.stringify({ totalMiB: TOTAL_MIB, chunkBytes: CHUNK_BYTES, receiver: 'child process', rows, ratio, floor, perRound }, null, 2));
  console.log(`wrote ${file.pathname}`);
}

await main();
