// A prompt's own log-probabilities through the co-located worker, on a real (tiny, random) model:
// chunked (rows capped by promptLogitRows), beside other requests, after a prefix-cache hit,
// they equal a teacher-forced run of the whole sequence in one step, exactly; the fault
// `shift-prompt-logprobs` breaks that.
import { afterEach, describe, expect, it } from 'vitest';
import {
  asRequestId,
  DEFAULT_TENANT,
  FaultSet,
  NO_FAULTS,
  samplingParams,
  type GenerateEvent,
  type SamplingParams,
  type TokenLogprob,
} from '../core/index.js';
import { randomModel } from '../gen/index.js';
import { REF_CONFIG } from '../gen/testing/ref-config.js';
import { refRunner } from './testing/ref-runner.js';
import { Sampler } from './sampler.js';
import { ColocatedWorker } from '../worker/index.js';
import { idWorker } from '../worker/testing/id-worker.js';

const PROMPT = [5, 17, 42, 8, 8, 63, 21, 90, 3, 44, 12, 7, 70];
const MAX_RUNNING = 4;

function engine(maxStepLogits: number, faults: FaultSet = NO_FAULTS) {
  return refRunner(randomModel(REF_CONFIG, 5), { numPages: 32, faults, maxStepLogits });
}

/** The reference: the whole prompt in one step, a logits row per token, log-softmax by the same sampler. */
async function teacherForced(prompt: readonly number[], topN: number): Promise<(TokenLogprob | null)[]> {
  const { pool, runner } = await engine(prompt.length);
  const owner = { rid: asRequestId('ref'), tenant: DEFAULT_TENANT };
  const pages = pool.ledger.allocate(Math.ceil(prompt.length / 4), owner);
  if (pages.kind !== 'allocated') throw new Error('pool');
  const [out] = await runner.step([
    { ...owner, tags: pages.tags, tokens: [...prompt], startPos: 0, wantLogits: true, logitCount: prompt.length },
  ]);
  if (out?.kind !== 'logits') throw new Error('no logits');
  const sampler = new Sampler(REF_CONFIG.vocabSize);
  const V = REF_CONFIG.vocabSize;
  return prompt.map((token, p) =>
    p === 0 ? null : sampler.logprobsOf(out.logits.slice((p - 1) * V, p * V), token, topN),
  );
}

/** The records without vLLM's rank (the reference has none); each rank is checked against the top list first. */
function withoutRank(logprobs: readonly (TokenLogprob | null)[] | undefined): (TokenLogprob | null)[] | undefined {
  return logprobs?.map((lp, p) => {
    if (lp === null) return null;
    const { promptRank, ...rest } = lp;
    const inTop = lp.top.findIndex((t) => t.logprob === lp.logprob);
    if (inTop >= 0) expect(promptRank, `position ${p}`).toBe(inTop + 1);
    else expect(promptRank, `position ${p}`).toBeGreaterThan(lp.top.length);
    return rest;
  });
}

let workers: ColocatedWorker[] = [];
afterEach(async () => {
  await Promise.all(workers.map((w) => w.close()));
  workers = [];
});

async function worker(promptLogitRows: number, faults: FaultSet = NO_FAULTS) {
  const { pool, runner } = await engine(MAX_RUNNING + promptLogitRows, faults);
  const w = idWorker(
    { pool, runner, vocabSize: REF_CONFIG.vocabSize },
    { maxRunningRequests: MAX_RUNNING, promptLogitRows, faults },
  );
  workers.push(w);
  return { w, pool };
}

let nextId = 0;
async function run(w: ColocatedWorker, prompt: readonly number[], sampling: Partial<SamplingParams>) {
  const events: GenerateEvent[] = [];
  const request = {
    rid: asRequestId(`r${nextId++}`),
    tenant: DEFAULT_TENANT,
    promptTokens: prompt,
    sampling: samplingParams(sampling),
  };
  for await (const e of w.generate(request, new AbortController().signal)) events.push(e);
  const prompts = events.flatMap((e) => (e.type === 'tokens' && e.promptLogprobs ? [e.promptLogprobs] : []));
  const end = events.at(-1);
  return { prompts, end, ids: events.flatMap((e) => (e.type === 'tokens' ? e.ids : [])) };
}

describe('prompt log-probabilities (echo, prompt_logprobs)', () => {
  it('equal a teacher-forced run exactly, in chunks of promptLogitRows + 1, beside other requests', async () => {
    const expected = await teacherForced(PROMPT, 3);
    const { w, pool } = await worker(3);
    const [echo, other] = await Promise.all([
      run(w, PROMPT, { maxTokens: 3, promptLogprobs: 3, logprobs: 1 }),
      run(w, PROMPT.slice(0, 9), { maxTokens: 5 }),
    ]);
    expect(echo.prompts).toHaveLength(1); // once, with the first token
    expect(withoutRank(echo.prompts[0])).toEqual(expected);
    expect(echo.prompts[0]?.[0]).toBeNull();
    expect(echo.ids).toHaveLength(3);
    expect(other.prompts).toEqual([]);
    expect(other.end?.type).toBe('finished');
    expect(pool.ledger.counts().allocated).toBe(0);
  });

  it('are computed, not cached: after the same prompt filled the prefix cache, still exact, no cached tokens', async () => {
    const expected = await teacherForced(PROMPT, 0);
    const { w } = await worker(64);
    await run(w, PROMPT, { maxTokens: 1 });
    const echo = await run(w, PROMPT, { maxTokens: 1, promptLogprobs: 0 });
    expect(withoutRank(echo.prompts[0])).toEqual(expected);
    expect(echo.end?.type === 'finished' && echo.end.usage.cachedTokens).toBe(0);
  });

  it('with no rows to spare go one token a step, still exact', async () => {
    const expected = await teacherForced(PROMPT, 2);
    const { w } = await worker(0);
    expect(withoutRank((await run(w, PROMPT, { maxTokens: 2, promptLogprobs: 2 })).prompts[0])).toEqual(expected);
  });

  it('under the fault shift-prompt-logprobs no longer match (the negative control)', async () => {
    const expected = await teacherForced(PROMPT, 1);
    const { w } = await worker(3, new FaultSet(['shift-prompt-logprobs']));
    expect(withoutRank((await run(w, PROMPT, { maxTokens: 1, promptLogprobs: 1 })).prompts[0])).not.toEqual(expected);
  });
});
