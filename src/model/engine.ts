// createEngine(): a loaded model made runnable — kernels chosen, weights prepared once, the KV
// pool allocated once from the op kernels' memory, a ModelRunner over them. The one place that
// decides which kernels run (createKernels; the engine thread calls it too):
//
//   kernels 'fast' (default), native addon built and the CPU runs it (useNativeDense):
//     dense: native (kernels/native) for every batch of f32 and block weights; f16/bf16 on native
//            up to 64 rows (nativeMaxM), larger batches on onnxruntime (BatchSplitDense)
//     ops:   wasm SIMD, attention on the native addon (NativeAttentionOps, 'wasm+native')
//   kernels 'fast', no addon or TESSERA_DENSE=ort:
//     dense: onnxruntime-node (ort) for every matmul (matrices <= 1 MiB on one thread, larger on all)
//     ops:   wasm SIMD
//   kernels 'fast' + deterministic   dense: wasm, batch-invariant      ops: wasm SIMD
//   kernels 'ref'                    dense: plain TS (ref)             ops: plain TS (ref)
//
// ort picks its kernels by batch size, so a row's bits can change with what runs beside it, and
// the native/ort split moves a f16 row between two backends by batch size; `deterministic` trades
// speed for outputs that do not depend on the batch, on wasm for every dtype (NativeDense alone is
// batch-invariant too, but the split is not). It must never read files (loadModel did) or choose
// a pool size (the caller did: --kv-pages, --kv-memory).
import { availableParallelism } from 'node:os';
import { assert, NO_FAULTS, type FaultSet, type KvDtype } from '../core/index.js';
import {
  createOrtDense,
  NativeAttentionOps,
  NativeDense,
  nativeAvailability,
  createRefDense,
  createRefOps,
  createWasmDense,
  createWasmOps,
  loadWasmRuntime,
  type DenseKernels,
  type OpKernels,
  type WeightDType,
} from '../kernels/index.js';
import { PagePool, createKvView, elementsPerPage, kvDtypeOf, type KvShape, type PagedKvView } from '../pages/index.js';
import type { ModelConfig } from './config.js';
import type { LoadedModel } from './load.js';
import { LoraBank } from './lora.js';
import { LocalLora, type LoraControl } from './lora-control.js';
import { ModelRunner } from './runner.js';
import { BatchSplitDense, SizeSplitDense } from './dense-split.js';
import { prepareWeights } from './weights-prepared.js';

export interface EngineOptions {
  /** 'fast' (default) or 'ref' (plain TypeScript: the oracle, for tests). */
  readonly kernels?: 'fast' | 'ref';
  /** Batch-invariant dense kernels: a row's output never depends on what else is in the step. */
  readonly deterministic?: boolean;
  /** Pages in the KV pool. */
  readonly kvPages: number;
  /** Token slots per page (default 16). */
  readonly pageSize?: number;
  /** How the pool stores K and V (default 'f32'; `--kv-dtype`). */
  readonly kvDtype?: KvDtype;
  /** Most tokens in one step (default 256): the largest prefill chunk. */
  readonly maxStepTokens?: number;
  /** Most requests wanting logits in one step (default 64): the largest decode batch. */
  readonly maxStepLogits?: number;
  /** Threads per dense matmul (default: every core). */
  readonly threads?: number;
  readonly faults?: FaultSet;
  /** The clock that times weight preparation (default performance.now). */
  readonly now?: () => number;
}

export interface EngineKernels {
  readonly dense: DenseKernels['name'];
  readonly ops: OpKernels['name'];
  readonly batchInvariant: boolean;
  readonly threads: number;
}

/** What an engine needs of a model: its config and checked tensors (loadModel's, or in memory). */
export type ModelWeights = Pick<LoadedModel, 'config' | 'tensors'>;

export interface Engine {
  readonly config: ModelConfig;
  readonly pool: PagePool;
  readonly runner: ModelRunner;
  readonly kernels: EngineKernels;
  /** Milliseconds spent preparing weights for the kernels (after loadModel). */
  readonly prepareMs: number;
  /** Bytes of weight matrices one decode step reads, as stored (the embedding excluded). */
  readonly weightBytesPerToken: number;
  /** Loads and drops LoRA adapters the forward pass applies per request (BatchItem.adapter). */
  readonly lora: LoraControl;
  dispose(): Promise<void>;
}

export const DEFAULT_PAGE_SIZE = 16;
export const DEFAULT_MAX_STEP_TOKENS = 256;
export const DEFAULT_MAX_STEP_LOGITS = 64;
/** onnxruntime matrices up to this size run on one thread (see dense-split.ts). */
export const ORT_SINGLE_THREAD_BYTES = 1 << 20;

export async function createEngine(model: ModelWeights, options: EngineOptions): Promise<Engine> {
  const now = options.now ?? (() => performance.now());
  const started = now();
  const threads = options.threads ?? availableParallelism();
  assert(Number.isInteger(threads) && threads >= 1, () => `threads must be a positive integer, got ${threads}`);
  const { dense, ops } = await createKernels(options.kernels ?? 'fast', options.deterministic === true, threads);
  const config = model.config;
  const shape: KvShape = {
    numPages: options.kvPages,
    pageSize: options.pageSize ?? DEFAULT_PAGE_SIZE,
    numLayers: config.numLayers,
    numKvHeads: config.numKvHeads,
    headDim: config.headDim,
    dtype: options.kvDtype ?? 'f32',
  };
  try {
    const weights = await prepareWeights(config, model.tensors, dense, ops);
    const pool = new PagePool({ kv: allocKvView(ops, shape), faults: options.faults ?? NO_FAULTS });
    const lora = new LoraBank(config);
    const runner = new ModelRunner({
      lora,
      config,
      weights,
      dense,
      ops,
      pool,
      maxStepTokens: options.maxStepTokens ?? DEFAULT_MAX_STEP_TOKENS,
      maxStepLogits: options.maxStepLogits ?? DEFAULT_MAX_STEP_LOGITS,
    });
    return {
      config,
      pool,
      runner,
      kernels: { dense: dense.name, ops: ops.name, batchInvariant: dense.batchInvariant, threads },
      prepareMs: now() - started,
      weightBytesPerToken: weights.bytesPerToken,
      lora: new LocalLora(lora, config),
      dispose: () => dense.dispose(),
    };
  } catch (error) {
    await dense.dispose();
    throw error;
  }
}

/** The KV pool's storage in the op kernels' memory (so attention reads it in place), zeroed. */
export function allocKvView(ops: OpKernels, shape: KvShape): PagedKvView {
  const length = shape.numPages * elementsPerPage(shape);
  const dtype = kvDtypeOf(shape);
  return createKvView(
    shape,
    dtype === 'q8_0' ? ops.allocU8(length) : dtype === 'f16' ? ops.allocU16(length) : ops.allocF32(length),
  );
}

/** The kernels `createEngine` runs with (also the engine thread's, engine-thread-main.ts). */
export async function createKernels(
  choice: 'fast' | 'ref',
  deterministic: boolean,
  threads: number,
): Promise<{ dense: DenseKernels; ops: OpKernels }> {
  if (choice === 'ref') return { dense: createRefDense(), ops: createRefOps() };
  const runtime = await loadWasmRuntime();
  const ops = await createWasmOps({ runtime });
  if (deterministic) return { dense: await createWasmDense({ runtime, threads }), ops };
  const ort =
    threads === 1
      ? await createOrtDense({ threads })
      : new SizeSplitDense(
          await createOrtDense({ threads: 1 }),
          await createOrtDense({ threads }),
          ORT_SINGLE_THREAD_BYTES,
        );
  if (!useNativeDense()) return { dense: ort, ops };
  return {
    dense: new BatchSplitDense(new NativeDense({ threads }), ort, nativeMaxM),
    ops: new NativeAttentionOps(ops, { threads }),
  };
}

/**
 * The largest batch (rows of x) each weight dtype runs on the native kernels; larger ones run on
 * onnxruntime. f32 and block weights: every batch, prefill chunks included, so onnxruntime never
 * holds a copy of them. The native kernels were faster at every m measured, on one thread and two
 * (f32 32000x768, two threads: m=16 5.98 ms against 6.26, m=256 62.3 against 66.5; q4_0 m=256
 * 39.3 against 64.4; q6_K 54.9 against 59.8). f16 / bf16: up to 64 rows, where the two are even
 * (f16 32000x768: m=32 10.2 against 13.3 ms, m=64 17.3 against 17.7, m=256 84.2 against 72.8:
 * widening halves for each block of 8 rows costs more than onnxruntime's f32 GEMM).
 */
const NATIVE_MAX_M_HALF = 64;
const nativeMaxM = (dtype: WeightDType): number => (dtype === 'f16' || dtype === 'bf16' ? NATIVE_MAX_M_HALF : Infinity);

/**
 * Whether matmuls (nativeMaxM's) and attention run on the native kernels: when the addon is built
 * and this CPU runs it, unless TESSERA_DENSE=ort asks for onnxruntime (and wasm attention) alone.
 * Says once, on stderr, why not when the addon is missing.
 */
export function useNativeDense(): boolean {
  if (process.env['TESSERA_DENSE'] === 'ort') return false;
  const found = nativeAvailability();
  if ('addon' in found) return true;
  if (!warnedNoNative) {
    warnedNoNative = true;
    process.stderr.write(`tessera: native dense kernels unavailable (${found.why}); using onnxruntime\n`);
  }
  return false;
}
let warnedNoNative = false;
