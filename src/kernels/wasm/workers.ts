// Worker threads that run the dense kernel on the runtime's shared memory, so a matmul can use
// every core. Each worker instantiates the same module on the same memory and waits on its own
// slot of a control block; the caller hands each thread a contiguous range of output rows.
// Splitting by rows never changes a dot product's arithmetic, so results stay batch-invariant
// (and thread-count-invariant). Every wait has a timeout; a worker failure throws, never hangs.
//
//   control slot (16 x int32 per worker):
//     [0] job sequence number, written by the caller (-1: quit)  [1] last finished job
//     [2..12] matmul arguments                                     [13] 0 ok, 1 the kernel threw
import { Worker } from 'node:worker_threads';
import { InvariantError } from '../../core/index.js';
import type { WasmRuntime } from './runtime.js';

const SLOT_INTS = 16;
const SEQ = 0;
const DONE = 1;
const ARGS = 2;
const STATUS = 13;
/** The longest one matmul may take before the caller gives up on a worker. */
const WAIT_TIMEOUT_MS = 60_000;

export type MatmulArgs = readonly [
  kind: number,
  w: number,
  scales: number,
  x: number,
  y: number,
  m: number,
  rows: number,
  cols: number,
  r0: number,
  r1: number,
  scratch: number,
];

// CommonJS source of each worker, run with `eval: true` (works from src/ and dist/ alike).
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, memory, control, index } = workerData;
const slot = new Int32Array(control, index * ${SLOT_INTS * 4}, ${SLOT_INTS});
const { exports } = new WebAssembly.Instance(module, { env: { memory, abort() { throw new Error('wasm kernel aborted'); } } });
parentPort.postMessage('ready');
let seen = 0;
for (;;) {
  Atomics.wait(slot, ${SEQ}, seen);
  seen = Atomics.load(slot, ${SEQ});
  if (seen < 0) break;
  try {
    exports.matmul(${Array.from({ length: 11 }, (_, i) => `slot[${ARGS + i}]`).join(', ')});
    slot[${STATUS}] = 0;
  } catch {
    slot[${STATUS}] = 1;
  }
  Atomics.store(slot, ${DONE}, seen);
  Atomics.notify(slot, ${DONE});
}
`;

export class DenseWorkers {
  readonly #workers: Worker[];
  readonly #control: Int32Array;
  #seq = 0;
  #closed = false;

  private constructor(workers: Worker[], control: Int32Array) {
    this.#workers = workers;
    this.#control = control;
  }

  /** Start `count` workers on `runtime`'s memory; resolves once every one is ready. */
  static async start(runtime: WasmRuntime, count: number): Promise<DenseWorkers> {
    const control = new SharedArrayBuffer(count * SLOT_INTS * 4);
    const workers = Array.from(
      { length: count },
      (_, index) =>
        new Worker(WORKER_SOURCE, {
          eval: true,
          workerData: { module: runtime.module, memory: runtime.memory, control, index },
        }),
    );
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            w.once('message', () => resolve());
            w.once('error', reject);
          }),
      ),
    );
    for (const w of workers) w.unref(); // an idle pool never keeps the process alive
    return new DenseWorkers(workers, new Int32Array(control));
  }

  get count(): number {
    return this.#workers.length;
  }

  /**
   * Run jobs[i] on worker i while `own` runs on the calling thread; returns when all are done.
   * Blocks the calling thread (a matmul is synchronous work either way).
   */
  run(jobs: readonly MatmulArgs[], own: () => void): void {
    if (this.#closed) throw new InvariantError('DenseWorkers.run after close');
    if (jobs.length > this.#workers.length)
      throw new InvariantError(`${jobs.length} jobs for ${this.#workers.length} workers`);
    const seq = ++this.#seq;
    jobs.forEach((args, i) => {
      const base = i * SLOT_INTS;
      this.#control.set(args, base + ARGS);
      Atomics.store(this.#control, base + SEQ, seq);
      Atomics.notify(this.#control, base + SEQ);
    });
    own();
    jobs.forEach((_, i) => {
      const base = i * SLOT_INTS;
      const deadline = Date.now() + WAIT_TIMEOUT_MS;
      for (
        let done = Atomics.load(this.#control, base + DONE);
        done !== seq;
        done = Atomics.load(this.#control, base + DONE)
      ) {
        if (Date.now() > deadline)
          throw new InvariantError(`dense worker ${i} did not finish within ${WAIT_TIMEOUT_MS} ms`);
        Atomics.wait(this.#control, base + DONE, done, 1000);
      }
      if (this.#control[base + STATUS] !== 0) throw new InvariantError(`dense worker ${i}: the wasm kernel failed`);
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#workers.forEach((_, i) => {
      Atomics.store(this.#control, i * SLOT_INTS + SEQ, -1);
      Atomics.notify(this.#control, i * SLOT_INTS + SEQ);
    });
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}
