// Measures this machine's memory read bandwidth: the bound a batch-1 decode cannot beat (every
// weight byte is read once per token). Threads each sum a disjoint slice of one buffer much
// larger than the caches, in WebAssembly SIMD, over a shared WebAssembly.Memory; the result is
// the best of a few runs. Benchmark code: allocates ~256 MiB and starts worker threads.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { WasmRuntime } from '../../src/kernels/index.js';

export interface BandwidthResult {
  /** Best observed read bandwidth, in GB/s (1e9 bytes per second). */
  readonly gbPerSecond: number;
  readonly threads: number;
  readonly bytes: number;
}

export interface BandwidthOptions {
  readonly bytes?: number;
  readonly runs?: number;
  /** Default: every core the OS reports. */
  readonly threads?: number;
}

// CommonJS source for an eval'd worker: instantiate the kernels on the shared memory, then sum
// whatever slice the main thread names, replying when done.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { exports } = new WebAssembly.Instance(workerData.module, { env: { memory: workerData.memory, abort() { throw new Error('abort'); } } });
parentPort.on('message', ({ ptr, n }) => parentPort.postMessage(exports.sumF32(ptr, n)));
`;

export async function measureReadBandwidth(options: BandwidthOptions = {}): Promise<BandwidthResult> {
  const threads = options.threads ?? availableParallelism();
  const runs = options.runs ?? 5;
  const sliceFloats = Math.floor((options.bytes ?? 256 * 1024 ** 2) / 4 / threads / 32) * 32;
  const bytes = sliceFloats * 4 * threads;
  const runtime = await WasmRuntime.load({ maxMemoryBytes: bytes + 64 * 1024 ** 2 });
  const ptr = runtime.alloc(bytes);
  runtime.f32(ptr, bytes / 4).fill(1); // commit every page before timing
  const workers = Array.from(
    { length: threads },
    () => new Worker(WORKER_SOURCE, { eval: true, workerData: { module: runtime.module, memory: runtime.memory } }),
  );
  try {
    const sumAll = () =>
      Promise.all(
        workers.map(
          (worker, i) =>
            new Promise<number>((resolve, reject) => {
              worker.once('message', resolve);
              worker.once('error', reject);
              worker.postMessage({ ptr: ptr + i * sliceFloats * 4, n: sliceFloats });
            }),
        ),
      );
    await sumAll(); // warm up: compile, fault in
    let best = Infinity;
    for (let r = 0; r < runs; r++) {
      const start = performance.now();
      const sums = await sumAll();
      best = Math.min(best, performance.now() - start);
      if (sums.some((s) => s !== sliceFloats))
        throw new Error(`bandwidth probe summed ${sums.join(', ')}, expected ${sliceFloats}`);
    }
    return { gbPerSecond: bytes / (best / 1000) / 1e9, threads, bytes };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
