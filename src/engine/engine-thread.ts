// The engine on a thread of its own: the forward pass runs on a worker_thread, so the main
// thread's I/O (HTTP, SSE, /health, sockets, the protocol machines, KV landing) never waits for
// a step. The main thread keeps the ModelRunner (page checks before, stamps after) over a
// PagePool whose storage is the thread's shared wasm memory; ThreadForward is its ForwardExec.
//
// Who owns what, at every moment (docs/ARCHITECTURE.md, "Threads"):
//   ledger, stamps, prefix cache, scheduler   the main thread, always; never sent to the thread
//   weights, kernels, activations            the engine thread, always
//   the data of a page                       the main thread, except while a step is in flight:
//                                            from ModelRunner's pool.lend(page tables) to its
//                                            pool.unlend(), the engine thread reads and writes
//                                            the pages of the step's page tables, and nothing on
//                                            the main thread may write them (PagePool refuses a
//                                            landing into a lent page; `skip-lend-check` is the
//                                            negative control)
// Why a landing cannot need a lent page: it writes only pages of a request that is receiving,
// and the scheduler plans only prefilling or decoding requests; the ledger gives each page one
// owner. The lend check makes that argument a checked invariant, not a hope.
// Reads beside a step are allowed: a prefill gathers the slots earlier steps finished (stamped
// only after this thread replied) while the next step computes, and the step in flight writes
// only from its items' start positions on, so a lent page's finished slots are read, never torn
// (src/worker/prefill-worker.ts; `send-in-flight` is the negative control's bug).
// It must never run two steps at once, or resolve a step before the thread replied.
import { Worker } from 'node:worker_threads';
import { assert, InvariantError, ModelLoadError, NO_FAULTS, type FaultSet, type KvDtype } from '../core/index.js';
import { detectKernelSupport, planKernels, type KernelChoice, type KernelPlan } from '../kernels/index.js';
import { PagePool, createKvView } from '../pages/index.js';
import type { ModelConfig, WeightsMode } from '../formats/index.js';
import {
  DEFAULT_MAX_STEP_LOGITS,
  DEFAULT_MAX_STEP_TOKENS,
  DEFAULT_PAGE_SIZE,
  type Engine,
  type EngineKernels,
} from './engine.js';
import type { ForwardBatch, ForwardSeq } from './forward/llama.js';
import type { LoraControl } from './lora-control.js';
import { ModelRunner, type ForwardExec } from './runner.js';
import type { WeightBytes } from './weights-prepared.js';

export interface EngineThreadOptions {
  /** The model spec, as loadModel takes it (the thread loads the weights itself). */
  readonly spec: string;
  readonly cacheDir?: string;
  /** A GGUF's weights mapped read-only (default) or read whole (--weights). */
  readonly weights?: WeightsMode;
  /** Which kernels (default 'auto'); planned here, on the calling thread, and built on the engine thread. */
  readonly kernels?: KernelChoice;
  /** Demand batch-invariant kernels (--deterministic). */
  readonly deterministic?: boolean;
  readonly kvPages: number;
  readonly pageSize?: number;
  /** How the pool stores K and V (default 'f32'). */
  readonly kvDtype?: KvDtype;
  readonly maxStepTokens?: number;
  readonly maxStepLogits?: number;
  /** Threads per dense matmul (default: the thread's own choice, every core). */
  readonly threads?: number;
  readonly faults?: FaultSet;
  /** A draft model's head cut to these tokens (draft-head.ts): logit rows hold their logits only. */
  readonly headTokens?: readonly number[];
  /**
   * Tests only: the thread waits this long before each step's forward pass, so a test can put a
   * write inside the step's window deterministically (the lend check's negative control). Default 0.
   */
  readonly testStepDelayMs?: number;
}

/** What the thread is started with (workerData). */
export interface EngineThreadData {
  readonly spec: string;
  readonly cacheDir: string | undefined;
  readonly weights: WeightsMode;
  /** Which backend runs which op (kernels' planKernels, on the calling thread). */
  readonly kernels: KernelPlan;
  readonly kvPages: number;
  readonly pageSize: number;
  readonly kvDtype: KvDtype;
  readonly maxStepTokens: number;
  readonly maxStepLogits: number;
  readonly threads: number;
  readonly testStepDelayMs: number;
  readonly headTokens: readonly number[] | undefined;
  /** The step's token ids and positions (maxStepTokens int32 each): the main thread writes them before it sends a step. */
  readonly stepInput: SharedArrayBuffer;
}

/** The step's token ids and positions, views over `stepInput` (the same on both threads). */
export function stepInputViews(data: EngineThreadData): { tokens: Int32Array; positions: Int32Array } {
  const n = data.maxStepTokens;
  return {
    tokens: new Int32Array(data.stepInput, 0, n),
    positions: new Int32Array(data.stepInput, n * Int32Array.BYTES_PER_ELEMENT, n),
  };
}

/** A step: its token ids and positions are the first numTokens of `stepInput`'s two arrays. */
export interface EngineThreadStep {
  readonly kind: 'step';
  readonly numTokens: number;
  readonly seqs: readonly ForwardSeq[];
  readonly logitRows: readonly number[];
  readonly hiddenRows?: readonly number[];
}

export type EngineThreadReply =
  | {
      readonly kind: 'ready';
      readonly kv: ArrayBufferLike;
      readonly kvByteOffset: number;
      readonly kvLength: number;
      readonly config: ModelConfig;
      readonly fingerprint: string;
      readonly kernels: EngineKernels;
      readonly prepareMs: number;
      readonly weightBytesPerToken: number;
      readonly weightBytes: WeightBytes;
      readonly weightsFile: WeightsFile;
      /** maxStepLogits x vocab floats: each step's logits, written by the thread before its 'done'. */
      readonly logits: SharedArrayBuffer;
    }
  | { readonly kind: 'done' }
  | { readonly kind: 'failed'; readonly message: string }
  /** The answer to a LoraCommand: the adapter's digest when loaded, or why it was not. */
  | { readonly kind: 'lora'; readonly digest?: string; readonly error?: string };

/**
 * Loads (from a GGUF LoRA file the thread reads) or drops an adapter. The thread applies a load at
 * once (no step names an adapter before its load was answered) and an unload between steps.
 */
export type LoraCommand =
  | { readonly kind: 'lora-load'; readonly name: string; readonly path: string; readonly scale: number }
  | { readonly kind: 'lora-unload'; readonly name: string };

/** How the engine thread's model file reached memory (model/load.ts's ModelSource). */
export interface WeightsFile {
  readonly how: WeightsMode;
  /** Why --weights mmap was asked for and the file was read instead; null otherwise. */
  readonly fellBack: string | null;
}

/** An Engine whose forward pass runs on its own thread; `fingerprint` was computed there. */
export interface ThreadedEngine extends Engine {
  readonly fingerprint: string;
  readonly weightsFile: WeightsFile;
  readonly lora: LoraControl;
}

export async function createThreadedEngine(o: EngineThreadOptions, threads: number): Promise<ThreadedEngine> {
  const maxStepTokens = o.maxStepTokens ?? DEFAULT_MAX_STEP_TOKENS;
  const data: EngineThreadData = {
    spec: o.spec,
    cacheDir: o.cacheDir,
    weights: o.weights ?? 'mmap',
    kernels: planKernels(o.kernels ?? 'auto', o.deterministic === true, detectKernelSupport()),
    kvPages: o.kvPages,
    pageSize: o.pageSize ?? DEFAULT_PAGE_SIZE,
    kvDtype: o.kvDtype ?? 'f32',
    maxStepTokens,
    maxStepLogits: o.maxStepLogits ?? DEFAULT_MAX_STEP_LOGITS,
    threads,
    testStepDelayMs: o.testStepDelayMs ?? 0,
    headTokens: o.headTokens,
    stepInput: new SharedArrayBuffer(2 * maxStepTokens * Int32Array.BYTES_PER_ELEMENT),
  };
  const worker = new Worker(threadMainUrl(), { workerData: data });
  const exec = new ThreadForward(worker, data);
  const ready = await exec.ready;
  const { config } = ready;
  const kv =
    data.kvDtype === 'q8_0'
      ? new Uint8Array(ready.kv, ready.kvByteOffset, ready.kvLength)
      : data.kvDtype === 'f16'
        ? new Uint16Array(ready.kv, ready.kvByteOffset, ready.kvLength)
        : new Float32Array(ready.kv, ready.kvByteOffset, ready.kvLength);
  const shape = {
    numPages: data.kvPages,
    pageSize: data.pageSize,
    numLayers: config.numLayers,
    numKvHeads: config.numKvHeads,
    headDim: config.headDim,
    dtype: data.kvDtype,
  };
  const pool = new PagePool({ kv: createKvView(shape, kv), faults: o.faults ?? NO_FAULTS });
  const runner = new ModelRunner({
    config,
    pool,
    exec,
    maxStepTokens: data.maxStepTokens,
    maxStepLogits: data.maxStepLogits,
    ...(data.headTokens === undefined ? {} : { logitWidth: data.headTokens.length }),
  });
  return {
    config,
    pool,
    runner,
    kernels: ready.kernels,
    prepareMs: ready.prepareMs,
    weightBytesPerToken: ready.weightBytesPerToken,
    weightBytes: ready.weightBytes,
    weightsFile: ready.weightsFile,
    fingerprint: ready.fingerprint,
    lora: exec,
    dispose: () => exec.close(),
  };
}

/** The compiled thread entry: beside this file in dist/, or dist/'s copy when running from src/ (tests). */
function threadMainUrl(): URL {
  const here = import.meta.url;
  return here.endsWith('.ts')
    ? new URL('../../dist/engine/engine-thread-main.js', here)
    : new URL('./engine-thread-main.js', here);
}

type Ready = Extract<EngineThreadReply, { kind: 'ready' }>;

/**
 * ForwardExec over the engine thread: one step in flight at most. The step's inputs and its
 * logits pass through shared memory, so a step allocates nothing that grows with the batch on
 * either thread (a transferred copy of the logits was ~1 MB of garbage per m100 step at batch
 * 8, collected on both threads): the main thread writes tokens and positions only while no step
 * is in flight, the thread writes the logits only inside a step, and the logits resolved stay
 * valid until the next run(), as ForwardExec says. postMessage orders the writes before the reads.
 */
class ThreadForward implements ForwardExec, LoraControl {
  readonly tokens: Int32Array;
  readonly positions: Int32Array;
  readonly ready: Promise<Ready>;
  readonly #worker: Worker;
  #logits: Float32Array | undefined;
  #vocabSize = 0;
  #pending:
    { resolve: (logits: Float32Array) => void; reject: (error: Error) => void; logits: Float32Array } | undefined;
  #readyWait: { resolve: (r: Ready) => void; reject: (error: Error) => void } | undefined;
  #dead: Error | undefined;
  /** LoRA commands sent, answered in order. */
  readonly #loraWaits: { resolve: (digest: string) => void; reject: (error: Error) => void }[] = [];

  constructor(worker: Worker, data: EngineThreadData) {
    this.#worker = worker;
    ({ tokens: this.tokens, positions: this.positions } = stepInputViews(data));
    this.ready = new Promise<Ready>((resolve, reject) => (this.#readyWait = { resolve, reject }));
    worker.on('message', (m: EngineThreadReply) => this.#onReply(m));
    worker.on('error', (error) => this.#die(new InvariantError('the engine thread failed', error)));
    worker.on('exit', (code) => this.#die(new InvariantError(`the engine thread exited (code ${code})`)));
  }

  run(batch: ForwardBatch): Promise<Float32Array> {
    assert(this.#pending === undefined, 'ThreadForward.run: a step is already in flight');
    if (this.#dead !== undefined) return Promise.reject(this.#dead);
    assert(this.#logits !== undefined, 'ThreadForward.run: the engine thread is not ready');
    const logits = this.#logits.subarray(0, batch.logitRows.length * this.#vocabSize);
    const step: EngineThreadStep = {
      kind: 'step',
      numTokens: batch.numTokens,
      seqs: batch.seqs.map((s) => ({
        row: s.row,
        numTokens: s.numTokens,
        startPos: s.startPos,
        pageTable: s.pageTable.slice(),
        rope: s.rope,
        ...(s.adapter === undefined ? {} : { adapter: s.adapter }),
      })),
      logitRows: [...batch.logitRows],
      ...(batch.hiddenRows === undefined ? {} : { hiddenRows: [...batch.hiddenRows] }),
    };
    return new Promise<Float32Array>((resolve, reject) => {
      this.#pending = { resolve, reject, logits };
      this.#worker.postMessage(step);
    });
  }

  loadLora(name: string, path: string, scale: number): Promise<string> {
    return this.#lora({ kind: 'lora-load', name, path, scale });
  }

  async unloadLora(name: string): Promise<void> {
    await this.#lora({ kind: 'lora-unload', name });
  }

  #lora(command: LoraCommand): Promise<string> {
    if (this.#dead !== undefined) return Promise.reject(this.#dead);
    return new Promise<string>((resolve, reject) => {
      this.#loraWaits.push({ resolve, reject });
      this.#worker.postMessage(command);
    });
  }

  async close(): Promise<void> {
    if (this.#dead !== undefined) return;
    const exited = new Promise<void>((resolve) => this.#worker.once('exit', () => resolve()));
    this.#worker.postMessage({ kind: 'close' });
    await exited;
  }

  #onReply(m: EngineThreadReply): void {
    switch (m.kind) {
      case 'ready':
        this.#logits = new Float32Array(m.logits);
        this.#vocabSize = m.config.vocabSize;
        this.#readyWait?.resolve(m);
        this.#readyWait = undefined;
        return;
      case 'done': {
        const p = this.#pending;
        this.#pending = undefined;
        p?.resolve(p.logits);
        return;
      }
      case 'failed':
        this.#die(new InvariantError(`the engine thread failed: ${m.message}`));
        return;
      case 'lora': {
        const wait = this.#loraWaits.shift();
        if (m.error !== undefined) wait?.reject(new ModelLoadError('LoRA adapter', m.error));
        else wait?.resolve(m.digest ?? '');
        return;
      }
    }
  }

  #die(error: Error): void {
    this.#dead ??= error;
    this.#readyWait?.reject(error);
    this.#readyWait = undefined;
    const p = this.#pending;
    this.#pending = undefined;
    p?.reject(error);
    for (const wait of this.#loraWaits.splice(0)) wait.reject(error);
  }
}
