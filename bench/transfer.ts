// KV transfer benchmark (`npm run bench:transfer`): GB/s of KV transfers from a sender to a
// decode node in another process (bench/transfer-receiver.ts, forked), over an authenticated
// TcpTransport on loopback, as in the protocol: the sender plays router and prefill (Reserve,
// then KvChunks with their xxh64 checksums into the reserved pages, then KvDone), the receiver
// is a real DecodeMachine over a PagePool of a Llama-3-8B-like shape (every header checked,
// every payload landed in its page as it arrives, every checksum verified, every page stamped,
// coverage verified before Ack). Two frame sizes: a whole page per frame (what the prefill
// machine sends for a prompt computed in page-aligned chunks) and --chunk-kib (default 1 MiB, a
// quarter page: 64 runs of 16 KiB scattered over the page, the costly case for landing).
// Beside them, in the same run, between the same two processes: a raw loopback socket pushing
// the same bytes; the same reading into one reused buffer (as the transport reads); a raw socket
// whose receiver hashes every byte as it arrives; one that also copies every byte into a pool
// (the floor for a receiver that verifies and lands); and the checksum alone. The protocol rows
// run for both KV dtypes (--kv-dtype f32 and f16) over the same prompts: f16 pages carry the same
// tokens in half the bytes; the table after them gives bytes per token, bytes per transfer, pool
// tokens per GiB and the measured transfer time per dtype.
// Sender and receiver run in parallel, as a prefill and a decode node do; each row also gives
// the CPU time of both ends (less noisy than wall time on a shared machine). Prints a table and
// writes bench/results/transfer-<time>.json. Asserts nothing about speed (a benchmark, not a
// test). The page-check cost per decode step is measured by bench/decode.ts.
//
//   node --import ./bench/lib/register-ts.mjs bench/transfer.ts [--quick] [--mib N] [--chunk-kib N] [--rounds N]
//   BENCH_PROFILE_DIR=dir   write a --cpu-prof of every receiver process there
import { fork, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { horizontalBarsSvg, svgPathFor } from './lib/svg-plot.js';
import { connect } from 'node:net';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import {
  asEpoch,
  asPageId,
  asRequestId,
  asTenantId,
  samplingParams,
  type KvDtype,
  type RequestId,
  type Tag,
} from '../src/core/index.js';
import { kvBytesPerPage, pagesInBytes, slotRangeBytes, tokensIn, type KvShape } from '../src/pages/index.js';
import { chunkChecksum, promptDigest, TcpTransport, TransferDigest, type Message } from '../src/transfer/index.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const TOTAL_MIB = Number(flag('--mib') ?? (quick ? 256 : 1024));
/** A page of a Llama-3-8B-like model (32 layers, 8 KV heads of 128, f32, 16 slots) is 4 MiB: 16 slots of 256 KiB. */
const SHAPE_OF_PAGE = { pageSize: 16, numLayers: 32, numKvHeads: 8, headDim: 128 } as const;
const SLOT_BYTES = slotRangeBytes({ numPages: 1, ...SHAPE_OF_PAGE }, 1);
/** Bytes of one slot (token) in a pool of each KV dtype. */
const slotBytesOf = (dtype: KvDtype): number => slotRangeBytes({ numPages: 1, ...SHAPE_OF_PAGE, dtype }, 1);
const KV_DTYPES_RUN: readonly KvDtype[] = ['f32', 'f16'];
const PAGE_BYTES = SHAPE_OF_PAGE.pageSize * SLOT_BYTES;
const PAGES_PER_TRANSFER = 16;
const ROUNDS = Number(flag('--rounds') ?? 3);
/** Slots per frame of the partial-page runs (--chunk-kib, a run of whole slots dividing a page). */
const PARTIAL_SLOTS = (Number(flag('--chunk-kib') ?? 1024) * 1024) / SLOT_BYTES;
if (!Number.isInteger(PARTIAL_SLOTS) || PARTIAL_SLOTS < 1 || SHAPE_OF_PAGE.pageSize % PARTIAL_SLOTS !== 0)
  throw new Error(`--chunk-kib must divide a page of ${SHAPE_OF_PAGE.pageSize} slots of ${SLOT_BYTES / 1024} KiB`);
const NUM_TRANSFERS = Math.max(1, Math.round((TOTAL_MIB * 2 ** 20) / (PAGES_PER_TRANSFER * PAGE_BYTES)));
const TOTAL_BYTES = NUM_TRANSFERS * PAGES_PER_TRANSFER * PAGE_BYTES;
/** The raw sockets write the same bytes in buffers of this size. */
const RAW_WRITE_BYTES = 2 ** 20;
/** The decode pool: room for the transfer being sent, the next one (reserved ahead) and admission's one-page margin. */
const SHAPE: KvShape = { numPages: 3 * PAGES_PER_TRANSFER, ...SHAPE_OF_PAGE };
const SECRET = 'bench-transfer-cluster-secret-0123456789';
/** The model fingerprint KvDone carries (the receiver's host serves the same; no model runs here). */
const BENCH_MODEL = '5eed5eed5eed5eed';
const HIGH_WATER = 16 * 1024 * 1024;
const RECEIVER = fileURLToPath(new URL('./transfer-receiver.ts', import.meta.url));

const payload = new Uint8Array(PAGE_BYTES).map((_, i) => (i * 131) & 0xff);
const gbps = (bytes: number, ms: number): number => bytes / 1e9 / (ms / 1000);
const now = (): number => performance.timeOrigin + performance.now();

/** A receiver process for one run: resolves its port, then (via `done`) when it has every byte. */
interface Done {
  readonly doneAt: number;
  readonly bad: number;
  /** CPU the receiver spent from its connection to the last byte. */
  readonly cpuMs: number;
}

async function receiver(
  mode: 'raw' | 'reused' | 'hashed' | 'landed' | 'protocol',
  kvDtype: KvDtype = 'f32',
): Promise<{ port: number; done: Promise<Done>; child: ChildProcess }> {
  const profile = process.env['BENCH_PROFILE_DIR'];
  const execArgv =
    profile === undefined ? process.execArgv : [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${profile}`];
  const child = fork(RECEIVER, [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = new Promise<number>((resolve) => child.once('message', (m: { port: number }) => resolve(m.port)));
  const shape: KvShape = { ...SHAPE, dtype: kvDtype };
  child.send({ mode, totalBytes: TOTAL_BYTES, secret: SECRET, shape, numTransfers: NUM_TRANSFERS });
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

async function raw(mode: 'raw' | 'reused' | 'hashed' | 'landed' = 'raw'): Promise<Run> {
  const r = await receiver(mode);
  const socket = connect({ port: r.port, host: '127.0.0.1' });
  socket.setNoDelay(true);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const start = now();
  const cpu = process.cpuUsage();
  const write = payload.subarray(0, RAW_WRITE_BYTES);
  for (let i = 0; i < TOTAL_BYTES / RAW_WRITE_BYTES; i++) {
    if (!socket.write(write)) await new Promise<void>((resolve) => socket.once('drain', resolve));
  }
  const done = await r.done;
  const senderCpuMs = cpuMs(cpu);
  socket.destroy();
  r.child.disconnect();
  return { ms: done.doneAt - start, bad: 0, senderCpuMs, receiverCpuMs: done.cpuMs };
}

/**
 * Plays router and prefill: per transfer, Reserve (the next one ahead), then frames of
 * slotsPerFrame slots into the reserved pages, then KvDone.
 */
async function protocol(slotsPerFrame: number, kvDtype: KvDtype = 'f32'): Promise<Run> {
  const r = await receiver('protocol', kvDtype);
  const slotBytes = slotBytesOf(kvDtype);
  let connected!: () => void;
  const up = new Promise<void>((resolve) => (connected = resolve));
  const waiting = new Map<RequestId, (tags: readonly Tag[]) => void>();
  const onMessage = (_from: string, m: Message): void => {
    if (m.type === 'Reserved') waiting.get(m.rid)?.(m.tags);
    else if (m.type === 'Rejected' || m.type === 'Failed') throw new Error(`${m.rid}: ${m.type} ${m.message}`);
  };
  const sender = TcpTransport.client({
    nodeId: 'bench-prefill',
    secret: SECRET,
    dial: true,
    handlers: { connected: () => connected(), closed: () => undefined, message: onMessage },
  });
  const peer = `127.0.0.1:${r.port}`;
  sender.send(peer, { type: 'Ack', rid: asRequestId('hello') }); // authenticate before timing (decode drops it)
  await up;
  const tokens = Array.from({ length: PAGES_PER_TRANSFER * SHAPE_OF_PAGE.pageSize }, (_, i) => i);
  const digestOfPrompt = promptDigest(tokens);
  const reserve = (k: number): Promise<readonly Tag[]> => {
    const rid = asRequestId(`bench-${k}`);
    const tags = new Promise<readonly Tag[]>((resolve) => waiting.set(rid, resolve));
    sender.send(peer, {
      type: 'Reserve',
      rid,
      tenant: asTenantId('bench'),
      promptTokens: tokens.length,
      promptDigest: digestOfPrompt,
      sampling: samplingParams({ maxTokens: 1 }),
      prefillAddress: 'bench-prefill',
    });
    return tags;
  };
  const start = now();
  const cpu = process.cpuUsage();
  let next = reserve(0);
  for (let k = 0; k < NUM_TRANSFERS; k++) {
    const rid = asRequestId(`bench-${k}`);
    const tags = await next;
    if (k + 1 < NUM_TRANSFERS) next = reserve(k + 1);
    const digest = new TransferDigest();
    let seq = 0;
    for (const tag of tags) {
      for (let firstSlot = 0; firstSlot < SHAPE_OF_PAGE.pageSize; firstSlot += slotsPerFrame) {
        const header = { rid, seq: seq++, tag, firstSlot, numSlots: slotsPerFrame, kvDtype };
        const bytes = payload.subarray(0, slotsPerFrame * slotBytes);
        const checksum = chunkChecksum(header, bytes);
        digest.add(checksum);
        sender.send(peer, { type: 'KvChunk', ...header, checksum, payload: bytes });
        if (sender.bufferedBytes(peer) > HIGH_WATER) await sender.whenDrained(peer);
      }
    }
    sender.send(peer, {
      type: 'KvDone',
      rid,
      numChunks: seq,
      tokensCovered: tokens.length,
      digest: digest.hex(),
      promptDigest: digestOfPrompt,
      model: BENCH_MODEL,
      firstToken: 1,
      firstLogprobs: [],
    });
  }
  const done = await r.done;
  const senderCpuMs = cpuMs(cpu);
  await sender.close();
  r.child.disconnect();
  return { ms: done.doneAt - start, bad: done.bad, senderCpuMs, receiverCpuMs: done.cpuMs };
}

function checksumOnly(): number {
  const header = {
    rid: asRequestId('bench'),
    seq: 0,
    tag: { page: asPageId(0), epoch: asEpoch(1) },
    firstSlot: 0,
    numSlots: SHAPE_OF_PAGE.pageSize,
    kvDtype: 'f32' as const,
  };
  const start = performance.now();
  for (let i = 0; i < TOTAL_BYTES / PAGE_BYTES; i++) chunkChecksum({ ...header, seq: i }, payload);
  return performance.now() - start;
}

const WHOLE = 'KV transfer, a page per frame';
const PARTIAL = `KV transfer, ${PARTIAL_SLOTS}/${SHAPE_OF_PAGE.pageSize} page per frame`;
const WHOLE_F16 = 'KV transfer f16 KV, a page per frame';
const PARTIAL_F16 = `KV transfer f16 KV, ${PARTIAL_SLOTS}/${SHAPE_OF_PAGE.pageSize} page per frame`;
/** Bytes the rows of each label move: the f16 rows carry the same tokens in half the bytes. */
const bytesOfRow = (what: string): number => (what.includes('f16 KV') ? TOTAL_BYTES / 2 : TOTAL_BYTES);
const RAW = 'raw socket';
const REUSED = 'raw, one reused read buffer';
const HASHED = 'raw + xxh64 on arrival';
const LANDED = 'raw, reused buffer, xxh64 + copy to a pool';

async function main(): Promise<void> {
  console.log(
    `KV transfer on loopback, decode in another process: ${TOTAL_BYTES / 2 ** 20} MiB in ${NUM_TRANSFERS} transfers of ${PAGES_PER_TRANSFER} pages of ${PAGE_BYTES / 2 ** 20} MiB; ${cpus()[0]?.model ?? 'cpu'} x${cpus().length}`,
  );
  await raw(); // warm-up
  await protocol(SHAPE_OF_PAGE.pageSize);
  const rows: { what: string; ms: number; gbps: number; senderCpuMs?: number; receiverCpuMs?: number }[] = [];
  const row = (what: string, round: number, r: Run) => ({
    what: `${what} (round ${round + 1})`,
    ms: r.ms,
    gbps: gbps(bytesOfRow(what), r.ms),
    senderCpuMs: r.senderCpuMs,
    receiverCpuMs: r.receiverCpuMs,
  });
  for (let round = 0; round < ROUNDS; round++) {
    const rawRun = await raw();
    const whole = await protocol(SHAPE_OF_PAGE.pageSize);
    const partial = await protocol(PARTIAL_SLOTS);
    if (whole.bad + partial.bad > 0)
      throw new Error(`${whole.bad + partial.bad} chunks or transfers failed on a clean loopback`);
    rows.push(row(RAW, round, rawRun), row(WHOLE, round, whole), row(PARTIAL, round, partial));
    const whole16 = await protocol(SHAPE_OF_PAGE.pageSize, 'f16');
    const partial16 = await protocol(PARTIAL_SLOTS, 'f16');
    if (whole16.bad + partial16.bad > 0) throw new Error('f16 chunks or transfers failed on a clean loopback');
    rows.push(row(WHOLE_F16, round, whole16), row(PARTIAL_F16, round, partial16));
    rows.push(
      row(REUSED, round, await raw('reused')),
      row(HASHED, round, await raw('hashed')),
      row(LANDED, round, await raw('landed')),
    );
  }
  const sumMs = checksumOnly();
  rows.push({ what: 'xxh64 checksum alone (one end)', ms: sumMs, gbps: gbps(TOTAL_BYTES, sumMs) });
  console.log(
    `${''.padEnd(56)} ${'wall'.padStart(7)}     ${'GB/s'.padStart(6)}  ${'CPU: sender'.padStart(12)} ${'receiver'.padStart(9)}`,
  );
  for (const r of rows) {
    const cpu =
      r.senderCpuMs === undefined
        ? ''
        : `  ${r.senderCpuMs.toFixed(0).padStart(9)} ms ${(r.receiverCpuMs ?? 0).toFixed(0).padStart(6)} ms`;
    console.log(`${r.what.padEnd(56)} ${r.ms.toFixed(0).padStart(7)} ms  ${r.gbps.toFixed(2).padStart(6)}${cpu}`);
  }
  const of = (what: string) => rows.filter((r) => r.what.startsWith(`${what} (`));
  const median = (xs: number[]): number => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  const gbpsOf = (what: string): number => median(of(what).map((r) => r.gbps));
  const cpuPerGiB = (what: string): number =>
    median(of(what).map((r) => (r.receiverCpuMs ?? 0) / (TOTAL_BYTES / 2 ** 30)));
  const perRound = (what: string): string =>
    of(what)
      .map((r, i) => (r.gbps / (of(RAW)[i]?.gbps ?? Number.NaN)).toFixed(2))
      .join(', ');
  const ratios = Object.fromEntries([WHOLE, PARTIAL, REUSED, HASHED, LANDED].map((w) => [w, gbpsOf(w) / gbpsOf(RAW)]));
  for (const what of [WHOLE, PARTIAL])
    console.log(
      `${what} / raw (medians) = ${(ratios[what] as number).toFixed(2)} (target >= 0.8); per round: ${perRound(what)}`,
    );
  console.log(
    `for comparison, / raw (medians): ${[REUSED, HASHED, LANDED].map((w) => `${w} ${(ratios[w] as number).toFixed(2)}`).join('; ')}`,
  );
  console.log(
    `receiver CPU per GiB (medians): ${[RAW, REUSED, LANDED, WHOLE, PARTIAL].map((w) => `${w} ${cpuPerGiB(w).toFixed(0)} ms`).join('; ')}`,
  );
  const medianMs = (what: string): number => median(of(what).map((r) => r.ms));
  const transferTokens = PAGES_PER_TRANSFER * SHAPE_OF_PAGE.pageSize;
  const kvDtypes = KV_DTYPES_RUN.map((dtype) => {
    const shape = {
      numLayers: SHAPE_OF_PAGE.numLayers,
      numKvHeads: SHAPE_OF_PAGE.numKvHeads,
      headDim: SHAPE_OF_PAGE.headDim,
    };
    const bytesPerPage = kvBytesPerPage({ ...shape, bytesPerElement: dtype === 'f16' ? 2 : 4 }, SHAPE_OF_PAGE.pageSize);
    const [whole, partial] = dtype === 'f16' ? [WHOLE_F16, PARTIAL_F16] : [WHOLE, PARTIAL];
    return {
      dtype,
      bytesPerToken: slotBytesOf(dtype),
      transferBytes: transferTokens * slotBytesOf(dtype),
      poolTokensPerGiB: tokensIn(pagesInBytes(2 ** 30, bytesPerPage), SHAPE_OF_PAGE.pageSize),
      wholeMsPerTransfer: medianMs(whole) / NUM_TRANSFERS,
      partialMsPerTransfer: medianMs(partial) / NUM_TRANSFERS,
    };
  });
  console.log(`per KV dtype, transfers of ${transferTokens} tokens (medians; f16 moves the same tokens):`);
  for (const k of kvDtypes)
    console.log(
      `  ${k.dtype}: ${k.bytesPerToken} B per token, ${(k.transferBytes / 2 ** 20).toFixed(0)} MiB per transfer, ` +
        `${k.poolTokensPerGiB} pool tokens per GiB; ${k.wholeMsPerTransfer.toFixed(1)} ms per transfer (page frames), ` +
        `${k.partialMsPerTransfer.toFixed(1)} ms (partial frames)`,
    );
  const [k32, k16] = kvDtypes as [(typeof kvDtypes)[0], (typeof kvDtypes)[0]];
  console.log(
    `  f16 / f32: bytes per token ${(k16.bytesPerToken / k32.bytesPerToken).toFixed(2)}, pool tokens per GiB ` +
      `${(k16.poolTokensPerGiB / k32.poolTokensPerGiB).toFixed(2)}, time per transfer ${(k16.wholeMsPerTransfer / k32.wholeMsPerTransfer).toFixed(2)} (page frames), ` +
      `${(k16.partialMsPerTransfer / k32.partialMsPerTransfer).toFixed(2)} (partial)`,
  );
  await mkdir(new URL('./results/', import.meta.url), { recursive: true });
  const file = new URL(`./results/transfer-${new Date().toISOString().replace(/[:.]/g, '-')}.json`, import.meta.url);
  const cpu = Object.fromEntries([RAW, REUSED, HASHED, LANDED, WHOLE, PARTIAL].map((w) => [w, cpuPerGiB(w)]));
  await writeFile(
    file,
    JSON.stringify(
      {
        totalBytes: TOTAL_BYTES,
        pageBytes: PAGE_BYTES,
        partialFrameSlots: PARTIAL_SLOTS,
        transfers: NUM_TRANSFERS,
        shape: SHAPE,
        receiver: 'child process, DecodeMachine',
        rows,
        ratios,
        receiverCpuMsPerGiB: cpu,
        kvDtypes,
      },
      null,
      2,
    ),
  );
  const svg = new URL(svgPathFor(file.href));
  await writeFile(
    svg,
    horizontalBarsSvg({
      title: 'KV transfer on loopback, decode in another process',
      subtitle: `${TOTAL_BYTES / 2 ** 20} MiB in ${NUM_TRANSFERS} transfers; medians of ${ROUNDS} rounds; ${cpus()[0]?.model ?? 'cpu'} x${cpus().length}; one run`,
      unit: 'GB/s (median)',
      bars: [
        ...[RAW, WHOLE, PARTIAL, REUSED, HASHED, LANDED].map((w) => ({
          label: w,
          value: gbpsOf(w),
          ...(w === RAW ? {} : { note: `${(ratios[w] as number).toFixed(2)}x raw` }),
        })),
        { label: 'xxh64 checksum alone (one end)', value: gbps(TOTAL_BYTES, sumMs) },
      ],
    }),
  );
  console.log(`wrote ${file.pathname} and ${svg.pathname}`);
}

await main();
