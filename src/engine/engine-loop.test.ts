// The engine loop's turn between steps: a step that held the event loop (a runner on this
// thread) is followed by a yield, so I/O gets in between steps; a step that let the loop turn
// while it ran (the engine thread's) is followed at once by the next, and the I/O that became
// ready as it ended runs beside that next step.
import { afterEach, describe, expect, it } from 'vitest';
import {
  asRequestId,
  DEFAULT_TENANT,
  NO_FAULTS,
  samplingParams,
  type BatchItem,
  type GenerateRequest,
} from '../core/index.js';
import type { ItemResult } from './runner.js';
import { EngineLoop } from './engine-loop.js';
import { schedulerFor } from '../worker/index.js';
import { argmaxSampler, EOS, fakePool, FakeRunner, tok } from '../worker/testing/fake-engine.js';

/** What happened, in order: each step's start and each I/O callback queued as a step ended. */
type Mark = 'step' | 'io';

/**
 * A FakeRunner that logs each step and, as each step's result settles, queues an I/O callback
 * (setImmediate: what a socket's data would be) that logs 'io'. `offThread`: the step settles
 * from a timer, letting the event loop turn while it runs (the engine thread's runner does);
 * otherwise it settles without the loop turning (a runner on this thread).
 */
class MarkingRunner extends FakeRunner {
  readonly marks: Mark[] = [];
  constructor(private readonly offThread: boolean) {
    super(fakePool(16));
  }

  override async step(items: readonly BatchItem[]): Promise<ItemResult[]> {
    this.marks.push('step');
    if (this.offThread) await new Promise((resolve) => setTimeout(resolve, 2));
    const results = await super.step(items);
    setImmediate(() => this.marks.push('io'));
    return results;
  }
}

let loops: EngineLoop[] = [];
afterEach(async () => {
  await Promise.all(loops.map((l) => l.close()));
  loops = [];
});

/** Runs one request of `maxTokens` tokens (a one-token prompt: one step each) to its end. */
async function run(offThread: boolean, maxTokens: number): Promise<Mark[]> {
  const runner = new MarkingRunner(offThread);
  const scheduler = schedulerFor('colocated', {
    pool: runner.pool,
    contextLength: 40,
    maxRunningRequests: 4,
    chunkedPrefillSize: 8,
    maxWaiting: 16,
    faults: NO_FAULTS,
    eosTokenIds: [EOS],
  });
  const rid = asRequestId('r0');
  const request: GenerateRequest = {
    rid,
    tenant: DEFAULT_TENANT,
    promptTokens: [tok('a')],
    sampling: samplingParams({ maxTokens, temperature: 0, ignoreEos: true }),
  };
  let ended!: () => void;
  const done = new Promise<void>((resolve) => (ended = resolve));
  let numOutput = 0;
  const loop = new EngineLoop({
    scheduler,
    runner,
    sampler: argmaxSampler,
    samplingOf: (r) =>
      r === rid
        ? { params: request.sampling, numOutputTokens: numOutput, outputTokens: () => scheduler.outputTokens(rid) }
        : undefined,
    onEvents: (events) => {
      for (const e of events) {
        if (e.kind === 'token') numOutput++;
        if (e.kind === 'finished' || e.kind === 'failed') {
          scheduler.release(rid);
          ended();
        }
      }
    },
    onFatal: (error) => {
      throw error;
    },
    faults: NO_FAULTS,
    checkEveryStep: true,
  });
  loops.push(loop);
  expect(scheduler.admit(request).kind).toBe('admitted');
  loop.start();
  await done;
  await new Promise((resolve) => setImmediate(resolve)); // the last step's 'io'
  expect(runner.marks.filter((m) => m === 'step')).toHaveLength(maxTokens);
  return runner.marks;
}

describe('EngineLoop between steps', () => {
  it('yields after a step that held the event loop: the I/O ready at its end runs before the next step', async () => {
    const marks = await run(false, 4);
    expect(marks).toEqual(['step', 'io', 'step', 'io', 'step', 'io', 'step', 'io']);
  });

  it('starts the next step at once after one that let the event loop turn: that I/O runs beside it', async () => {
    const marks = await run(true, 4);
    expect(marks).toEqual(['step', 'step', 'io', 'step', 'io', 'step', 'io', 'io']);
  });
});
