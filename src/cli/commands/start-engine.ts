// What every serving role starts with (co-located `serve`, and `serve --role prefill|decode`):
//   1. the pool plan from the model's config (no weights read yet) and the pool flags, and the
//      start-up check: a context that does not fit the pool refuses to start (skip-startup-check
//      is its test-only negative control);
//   2. the model's config, tokenizer and chat template on this thread (no weights); the engine
//      on a thread of its own (src/engine's engine-thread.ts: it loads the weights, prepares the
//      kernels and runs every forward pass there), over the planned pool;
//   3. with --draft-model: the draft model's config and tokenizer, refused (exit 2) unless its
//      vocabulary is the target's id for id; its engine on a thread of its own, with a pool of its
//      own holding as many tokens as the target's (a small model's KV is small).
import { availableParallelism } from 'node:os';
import { PROMPT_LOGIT_ROWS } from '../../core/index.js';
import { detectKernelSupport, planKernels, summarizeKernelPlan } from '../../kernels/index.js';
import type { ServeConfig } from '../config.js';
import { createThreadedEngine, describeWeights, type ThreadedEngine, DraftModel } from '../../engine/index.js';
import { loadModelInfo, type ModelInfo } from '../../model/index.js';
import { checkDraftVocabulary, readModelConfig } from '../config-model.js';
import { planPool, startupCheckError, type PoolPlan } from '../config-pool.js';
import { memoryCheckError, planMemory, readWeightsOnDisk } from '../config-memory.js';
import { progressDisplay } from './gen-model.js';

export interface StartedEngine {
  readonly plan: PoolPlan;
  readonly model: ModelInfo;
  readonly engine: ThreadedEngine;
  /** The kernels in use, for the start-up line and /health: "native (avx512) dense + attention, wasm ops, batch-invariant". */
  readonly kernels: string;
  /** --draft-model's drafter (its engine's pool and runner), for the worker; absent without one. */
  readonly drafter?: { readonly name: string; readonly model: DraftModel; readonly engine: ThreadedEngine };
}

export async function startEngine(config: ServeConfig, log: (line: string) => void): Promise<StartedEngine> {
  const modelConfig = await readModelConfig(config.model, config.home);
  const plan = planPool(modelConfig, config.pool);
  const refusal = startupCheckError(plan);
  if (refusal !== undefined) {
    if (!config.faults.has('skip-startup-check')) throw refusal;
    log(`start-up check skipped (fault skip-startup-check): ${refusal.message}`);
  }
  // Weights, KV pool and activations against the machine's memory (`tessera plan`'s numbers).
  // The experts read in place only on the native kernels (the engine plans its kernels alike).
  const native = planKernels(config.kernels, config.deterministic, detectKernelSupport()).backend === 'native';
  const onDisk = await readWeightsOnDisk(config.model, config.home, config.weights, native);
  const memory = planMemory(modelConfig, onDisk, plan, {
    maxStepTokens: config.chunkedPrefillSize,
    maxStepLogits: config.maxRunningRequests + PROMPT_LOGIT_ROWS,
  });
  const tooBig = memoryCheckError(memory);
  if (tooBig !== undefined) {
    if (!config.faults.has('skip-memory-check')) throw tooBig;
    log(`memory check skipped (fault skip-memory-check): ${tooBig.message}`);
  }
  const display = progressDisplay(process.stderr);
  const model = await loadModelInfo(config.model, { cacheDir: config.home, onProgress: display.update });
  display.done();
  const draftSpec = config.speculation.maxDraft === 0 ? null : config.draftModel;
  if (draftSpec !== null) await checkDraftVocabulary(config.model, draftSpec, model, config.home); // before any weights load
  const repacked = model.source.repacked;
  if (repacked !== undefined)
    log(
      `MXFP4: ${repacked.tensors} tensors (${mib(repacked.mxfp4Bytes)} MiB) repacked exactly at load to ` +
        `q8_0${repacked.bf16Tensors > 0 ? ` (${repacked.bf16Tensors} to bf16)` : ''}: ${mib(repacked.repackedBytes)} MiB`,
    );
  log('loading the weights on the engine thread');
  const engine = await startThreadedEngine(
    config,
    config.model,
    plan,
    // A prompt's own log-probabilities (echo), and speculation's drafts (at most maxBatch decodes draft).
    config.maxRunningRequests + PROMPT_LOGIT_ROWS + config.speculation.maxBatch * config.speculation.maxDraft,
  );
  const kernels = summarizeKernelPlan(engine.kernels.plan);
  if (engine.kernels.plan.fellBack !== null) log(`kernels: ${kernels} (${engine.kernels.plan.fellBack})`);
  log(describeWeights(engine.weightsFile, engine.weightBytes, engine.kernels.dense));
  if (draftSpec === null) return { plan, model, engine, kernels };
  const drafter = await startDraftModel(config, draftSpec, plan, log).catch(async (error: unknown) => {
    await engine.dispose();
    throw error;
  });
  return { plan, model, engine, kernels, drafter };
}

async function startDraftModel(
  config: ServeConfig,
  spec: string,
  plan: PoolPlan,
  log: (line: string) => void,
): Promise<NonNullable<StartedEngine['drafter']>> {
  log(`loading the draft model ${spec} on its own engine thread`);
  // Its pool holds as many tokens as the target's; a step drafts for at most maxBatch decodes.
  // --draft-vocab N: the head's rows are the first N ids (a BPE vocabulary's merge order, roughly its frequency).
  const headTokens =
    config.draftVocab === undefined ? undefined : Int32Array.from({ length: config.draftVocab }, (_, i) => i);
  const engine = await startThreadedEngine(config, spec, plan, config.speculation.maxBatch, headTokens);
  const model = new DraftModel({
    runner: engine.runner,
    maxBatch: config.speculation.maxBatch,
    faults: config.faults,
    ...(headTokens === undefined ? {} : { headTokens }),
  });
  return { name: spec, model, engine };
}

/** A model's engine on its own thread over a pool of the plan's shape (the target's, and a draft model's). */
function startThreadedEngine(
  config: ServeConfig,
  spec: string,
  plan: PoolPlan,
  maxStepLogits: number,
  headTokens?: Int32Array,
): Promise<ThreadedEngine> {
  return createThreadedEngine(
    {
      spec,
      cacheDir: config.home,
      kernels: config.kernels,
      weights: config.weights,
      deterministic: config.deterministic,
      kvPages: plan.numPages,
      pageSize: plan.pageSize,
      kvDtype: plan.kvDtype,
      maxStepTokens: config.chunkedPrefillSize,
      maxStepLogits,
      faults: config.faults,
      ...(headTokens === undefined ? {} : { headTokens: [...headTokens] }),
    },
    availableParallelism(),
  );
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}
