// Test support: a ModelRunner on the reference kernels over its own page pool, for unit tests
// that run a real (tiny, random) model step by step. Owns only that set-up; it must never be
// wired into a server (src/cli builds runners through the engine).
import { NO_FAULTS, type FaultSet, type KvDtype } from '../../core/index.js';
import type { ModelConfig } from '../../formats/index.js';
import { createRefDense, createRefOps, type DenseKernels, type HostTensor } from '../../kernels/index.js';
import { PagePool } from '../../pages/index.js';
import { ModelRunner } from '../runner.js';
import { prepareWeights, type PreparedWeights } from '../weights-prepared.js';

export interface RefRunnerOptions {
  readonly numPages: number;
  readonly pageSize?: number;
  readonly dtype?: KvDtype;
  readonly faults?: FaultSet;
  readonly maxStepLogits?: number;
}

export interface RefRunner {
  readonly runner: ModelRunner;
  readonly pool: PagePool;
  readonly dense: DenseKernels;
  readonly weights: PreparedWeights;
}

/** A runner of `model` (gen's randomModel output) with 32 step tokens, a pool of pages of 4 by default. */
export async function refRunner(
  model: { readonly config: ModelConfig; readonly tensors: Map<string, HostTensor> },
  { numPages, pageSize = 4, dtype = 'f32', faults = NO_FAULTS, maxStepLogits = 4 }: RefRunnerOptions,
): Promise<RefRunner> {
  const { config, tensors } = model;
  const dense = createRefDense();
  const ops = createRefOps();
  const weights = await prepareWeights(config, tensors, dense, ops);
  const geometry = { numLayers: config.numLayers, numKvHeads: config.numKvHeads, headDim: config.headDim };
  const pool = PagePool.create({ numPages, pageSize, ...geometry, dtype }, faults);
  const runner = new ModelRunner({ config, weights, dense, ops, pool, maxStepTokens: 32, maxStepLogits });
  return { runner, pool, dense, weights };
}
