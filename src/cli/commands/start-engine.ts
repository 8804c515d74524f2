// What every serving role starts with (co-located `serve`, and `serve --role prefill|decode`):
//   1. the pool plan from the model's config (no weights read yet) and the pool flags, and the
//      start-up check: a context that does not fit the pool refuses to start (skip-startup-check
//      is its test-only negative control);
//   2. the model's config, tokenizer and chat template on this thread (no weights); the engine
//      on a thread of its own (src/model's engine-thread.ts: it loads the weights, prepares the
//      kernels and runs every forward pass there), over the planned pool.
import { availableParallelism } from 'node:os';
import { PROMPT_LOGIT_ROWS } from '../../core/index.js';
import { summarizeKernelPlan } from '../../kernels/index.js';
import type { ServeConfig } from '../config.js';
import { createThreadedEngine, loadModelInfo, type ModelInfo, type ThreadedEngine } from '../../model/index.js';
import { readModelConfig } from '../config-model.js';
import { planPool, startupCheckError, type PoolPlan } from '../config-pool.js';
import { progressDisplay } from './gen-model.js';

export interface StartedEngine {
  readonly plan: PoolPlan;
  readonly model: ModelInfo;
  readonly engine: ThreadedEngine;
  /** The kernels in use, for the start-up line and /health: "native (avx512-vnni) dense + attention, wasm ops, batch-invariant". */
  readonly kernels: string;
}

export async function startEngine(config: ServeConfig, log: (line: string) => void): Promise<StartedEngine> {
  const plan = planPool(await readModelConfig(config.model, config.home), config.pool);
  const refusal = startupCheckError(plan);
  if (refusal !== undefined) {
    if (!config.faults.has('skip-startup-check')) throw refusal;
    log(`start-up check skipped (fault skip-startup-check): ${refusal.message}`);
  }
  const display = progressDisplay(process.stderr);
  const model = await loadModelInfo(config.model, { cacheDir: config.home, onProgress: display.update });
  display.done();
  log('loading the weights on the engine thread');
  const engine = await createThreadedEngine(
    {
      spec: config.model,
      cacheDir: config.home,
      kernels: config.kernels,
      deterministic: config.deterministic,
      kvPages: plan.numPages,
      pageSize: plan.pageSize,
      kvDtype: plan.kvDtype,
      maxStepTokens: config.chunkedPrefillSize,
      // A prompt's own log-probabilities (echo), and speculation's drafts (at most maxBatch decodes draft).
      maxStepLogits:
        config.maxRunningRequests + PROMPT_LOGIT_ROWS + config.speculation.maxBatch * config.speculation.maxDraft,
      faults: config.faults,
    },
    availableParallelism(),
  );
  const kernels = summarizeKernelPlan(engine.kernels.plan);
  if (engine.kernels.plan.fellBack !== null) log(`kernels: ${kernels} (${engine.kernels.plan.fellBack})`);
  return { plan, model, engine, kernels };
}
