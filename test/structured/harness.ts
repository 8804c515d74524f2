// An in-process co-located worker over a real model (builtin:austen by default, or a model file
// such as gen-model's qwen3-tiny GGUF: another vocabulary) with structured output on: the fast
// runner the structured-output tests drive without HTTP. Every page is checked before it is read
// and the ledger after every step.
import {
  asRequestId,
  DEFAULT_TENANT,
  FaultSet,
  NO_FAULTS,
  type FaultName,
  samplingParams,
  type ConstraintSpec,
  type GenerateEvent,
  type SamplingParams,
} from '../../src/core/index.js';
import { GrammarEngine, grammarVocab } from '../../src/grammar/index.js';
import { createEngine, Sampler, type Engine } from '../../src/engine/index.js';
import { loadModel, type LoadedModel } from '../../src/model/index.js';
import { ColocatedWorker } from '../../src/worker/index.js';

export interface Runner {
  readonly model: LoadedModel;
  readonly engine: Engine;
  readonly worker: ColocatedWorker;
  readonly grammar: GrammarEngine;
  run(prompt: string, spec: ConstraintSpec | undefined, sampling: Partial<SamplingParams>): Promise<RunResult>;
  close(): Promise<void>;
}

export interface RunResult {
  readonly text: string;
  readonly ids: readonly number[];
  readonly end: Exclude<GenerateEvent, { type: 'tokens' }>;
}

export async function structuredRunner(
  o: { readonly deterministic?: boolean; readonly faults?: readonly FaultName[]; readonly model?: string } = {},
): Promise<Runner> {
  const root = o.model ?? 'builtin:austen';
  const model = await loadModel(root);
  const engine = await createEngine(model, {
    deterministic: o.deterministic ?? false,
    kvPages: 256,
    pageSize: 16,
    maxStepTokens: 256,
    maxStepLogits: 16,
    faults: NO_FAULTS,
  });
  const grammar = new GrammarEngine(grammarVocab(model.tokenizer, model.config.vocabSize));
  const worker = new ColocatedWorker({
    modelName: root === 'builtin:austen' ? 'austen' : 'model',
    root,
    contextLength: model.config.maxPositionEmbeddings,
    pool: engine.pool,
    runner: engine.runner,
    sampler: new Sampler(model.config.vocabSize),
    tokenizer: model.tokenizer,
    eosTokenIds: model.config.eosTokenIds,
    maxRunningRequests: 16,
    chunkedPrefillSize: 256,
    maxWaiting: 64,
    faults: new FaultSet(o.faults ?? []),
    checkEveryStep: true,
    grammar,
  });
  let next = 0;
  return {
    model,
    engine,
    worker,
    grammar,
    async run(prompt, spec, sampling) {
      const request = {
        rid: asRequestId(`s${next++}`),
        tenant: DEFAULT_TENANT,
        promptTokens: model.tokenizer.encode(prompt),
        sampling: samplingParams({ ...sampling, ...(spec === undefined ? {} : { constraint: spec }) }),
      };
      let text = '';
      const ids: number[] = [];
      for await (const event of worker.generate(request, new AbortController().signal)) {
        if (event.type === 'tokens') {
          text += event.text;
          ids.push(...event.ids);
        } else return { text, ids, end: event };
      }
      throw new Error('the worker ended a request without a terminal event');
    },
    async close() {
      await worker.close();
      await engine.dispose();
    },
  };
}
