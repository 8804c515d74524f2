// Tests only: requests run to their ends in one engine loop over a real runner (all admitted at
// once, so they share steps), with the scheduler's integrity checked around every step: the
// harness of the speculation tests (spec-decode.test.ts, draft-model.test.ts).
import {
  asRequestId,
  asTenantId,
  NO_FAULTS,
  type FaultSet,
  type GenerateRequest,
  type RequestId,
  type SamplingParams,
} from '../../core/index.js';
import { Sampler, type ModelRunner, EngineLoop } from '../../engine/index.js';
import type { Scheduler, SpecOptions } from '../../scheduler/index.js';
import type { DraftModel } from '../../engine/index.js';
import { schedulerFor } from '../scheduler-for.js';

export interface SpecRun {
  readonly outputs: Map<RequestId, number[]>;
  readonly numDrafted: number;
  readonly numAccepted: number;
  readonly numRolledBack: number;
  readonly fatal: unknown;
  readonly scheduler: Scheduler;
}

export interface SpecLoopOptions {
  readonly runner: ModelRunner;
  readonly prompts: readonly (readonly number[])[];
  readonly params: (i: number) => SamplingParams;
  readonly speculation?: SpecOptions;
  readonly drafter?: DraftModel;
  readonly faults?: FaultSet;
}

export async function runSpecLoop(o: SpecLoopOptions): Promise<SpecRun> {
  const { runner } = o;
  const pool = runner.pool;
  const faults = o.faults ?? NO_FAULTS;
  const scheduler = schedulerFor('colocated', {
    pool,
    contextLength: 64,
    maxRunningRequests: 8,
    chunkedPrefillSize: 64,
    maxWaiting: 1000,
    faults,
    eosTokenIds: [],
    ...(o.speculation === undefined ? {} : { speculation: o.speculation }),
  });
  const requests: GenerateRequest[] = o.prompts.map((promptTokens, i) => ({
    rid: asRequestId(`r${i}`),
    tenant: asTenantId(`t${i % 2}`),
    promptTokens,
    sampling: o.params(i),
  }));
  const byRid = new Map(requests.map((r) => [r.rid, r]));
  const outputs = new Map<RequestId, number[]>(requests.map((r) => [r.rid, []]));
  let left = requests.length;
  let fatal: unknown;
  let ended!: () => void;
  const done = new Promise<void>((resolve) => (ended = resolve));
  const loop = new EngineLoop({
    scheduler,
    runner,
    sampler: new Sampler(runner.config.vocabSize),
    samplingOf: (rid) => {
      const request = byRid.get(rid);
      const view = scheduler.view(rid);
      if (request === undefined || view === undefined) return undefined;
      return {
        params: request.sampling,
        numOutputTokens: view.numOutputTokens,
        outputTokens: () => scheduler.outputTokens(rid),
      };
    },
    onEvents: (events) => {
      for (const e of events) {
        if (e.kind === 'token') outputs.get(e.rid)?.push(e.token);
        if (e.kind === 'failed') throw e.error;
        if (e.kind === 'finished' && --left === 0) ended();
      }
    },
    onFatal: (error) => {
      fatal = error;
      ended();
    },
    faults,
    checkEveryStep: true,
    maxStepMs: 'off',
    pool,
    ...(o.drafter === undefined ? {} : { drafter: o.drafter }),
  });
  for (const request of requests) {
    const admitted = scheduler.admit(request);
    if (admitted.kind !== 'admitted') throw new Error(`${request.rid} was not admitted: ${admitted.kind}`);
  }
  loop.start();
  await done;
  await loop.close();
  return { outputs, ...scheduler.specStats, numRolledBack: loop.numRolledBack, fatal, scheduler };
}
