// createEngine(): a loaded model made runnable — kernels built from their plan (which backend
// runs which op: src/kernels/choose.ts, the one place that decides; the engine thread builds its
// kernels from the same plan), weights prepared once, the KV pool allocated once from the op
// kernels' memory, a ModelRunner over them. It must never read files (loadModel did), read
// configuration (the CLI passes the kernel choice down) or choose a pool size (the caller did:
// --kv-pages, --kv-memory).
import { availableParallelism } from 'node:os';
import { assert, NO_FAULTS, type FaultSet, type KvDtype } from '../core/index.js';
import {
  createKernels,
  detectKernelSupport,
  nativeLoraRows,
  planKernels,
  type DenseKernels,
  type KernelChoice,
  type KernelPlan,
  type OpKernels,
} from '../kernels/index.js';
import { PagePool, createKvView, elementsPerPage, kvDtypeOf, type KvShape, type PagedKvView } from '../pages/index.js';
import type { ModelConfig } from '../formats/index.js';
import type { LoadedModel } from '../model/index.js';
import { LoraBank } from './lora.js';
import { LocalLora, type LoraControl } from './lora-control.js';
import { ModelRunner } from './runner.js';
import { prepareWeights, type WeightBytes } from './weights-prepared.js';

export interface EngineOptions {
  /** Which kernels (default 'auto': the fastest this machine runs; 'ref': the oracle, for tests). */
  readonly kernels?: KernelChoice;
  /** Demand batch-invariant kernels: a row's output never depends on what else is in the step. */
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
  /** LoRA's low-rank products: on the native addon when the dense kernels are native ('auto'), or in TypeScript (bench:lora's A/B). */
  readonly loraKernels?: 'auto' | 'typescript';
  /** Routed experts used in place where the kernels read their file layout (default true; prepareWeights' option). */
  readonly expertsInPlace?: boolean;
  /** The clock that times weight preparation (default performance.now). */
  readonly now?: () => number;
}

export interface EngineKernels {
  /** Which backend runs which op (printable: kernels' formatKernelPlan). */
  readonly plan: KernelPlan;
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
  /** The model's tensor bytes repacked into the kernels' memory, and those read in place. */
  readonly weightBytes: WeightBytes;
  /** Loads and drops LoRA adapters the forward pass applies per request (BatchItem.adapter). */
  readonly lora: LoraControl;
  dispose(): Promise<void>;
}

export const DEFAULT_PAGE_SIZE = 16;
export const DEFAULT_MAX_STEP_TOKENS = 256;
export const DEFAULT_MAX_STEP_LOGITS = 64;

export async function createEngine(model: ModelWeights, options: EngineOptions): Promise<Engine> {
  const now = options.now ?? (() => performance.now());
  const started = now();
  const threads = options.threads ?? availableParallelism();
  assert(Number.isInteger(threads) && threads >= 1, () => `threads must be a positive integer, got ${threads}`);
  const plan = planKernels(options.kernels ?? 'auto', options.deterministic === true, detectKernelSupport());
  const { dense, ops } = await createKernels(plan, threads);
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
    const weights = await prepareWeights(config, model.tensors, dense, ops, { expertsInPlace: options.expertsInPlace });
    const pool = new PagePool({ kv: allocKvView(ops, shape), faults: options.faults ?? NO_FAULTS });
    const lora = new LoraBank(
      config,
      dense.name === 'native' && options.loraKernels !== 'typescript' ? nativeLoraRows() : null,
    );
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
      kernels: engineKernels(plan, dense, ops, threads),
      prepareMs: now() - started,
      weightBytesPerToken: weights.bytesPerToken,
      weightBytes: weights.bytes,
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

/** What an engine reports of its kernels (createEngine's and the engine thread's). */
export function engineKernels(plan: KernelPlan, dense: DenseKernels, ops: OpKernels, threads: number): EngineKernels {
  return { plan, dense: dense.name, ops: ops.name, batchInvariant: dense.batchInvariant, threads };
}
