// Embedding requests through the co-located worker on a real (tiny, random) model: prefill only
// (chunked), no token sampled, pages back after; the hidden state is the final-normed state of
// the last token: the lm_head applied to it gives exactly the logits a plain run gives there.
import { afterEach, describe, expect, it } from 'vitest';
import { asRequestId, DEFAULT_TENANT, samplingParams, type GenerateEvent } from '../core/index.js';
import { randomModel } from '../gen/index.js';
import { REF_CONFIG } from '../gen/testing/ref-config.js';
import { refRunner } from './testing/ref-runner.js';
import { ColocatedWorker } from '../worker/index.js';
import { idWorker } from '../worker/testing/id-worker.js';

const PROMPT = [5, 17, 42, 8, 8, 63, 21, 90, 3, 44, 12, 7, 70];

function engine() {
  return refRunner(randomModel(REF_CONFIG, 5), { numPages: 32 });
}

let workers: ColocatedWorker[] = [];
afterEach(async () => {
  await Promise.all(workers.map((w) => w.close()));
  workers = [];
});

let nextId = 0;
async function run(w: ColocatedWorker, prompt: readonly number[], embed: boolean): Promise<GenerateEvent[]> {
  const request = {
    rid: asRequestId(`e${nextId++}`),
    tenant: DEFAULT_TENANT,
    promptTokens: prompt,
    sampling: samplingParams({ maxTokens: 3 }),
    ...(embed ? { embed: true as const } : {}),
  };
  const events: GenerateEvent[] = [];
  for await (const e of w.generate(request, new AbortController().signal)) events.push(e);
  return events;
}

describe('embedding requests', () => {
  it("finish after the prompt with its last token's final hidden state, beside a generation; pages back", async () => {
    const { pool, runner, dense, weights } = await engine();
    const w = idWorker({ pool, runner, vocabSize: REF_CONFIG.vocabSize });
    workers.push(w);
    const [embedded, generated] = await Promise.all([run(w, PROMPT, true), run(w, PROMPT.slice(0, 6), false)]);
    expect(embedded.map((e) => e.type)).toEqual(['finished']); // nothing sampled
    const end = embedded[0];
    if (end?.type !== 'finished' || end.embedding === undefined) throw new Error('no embedding');
    expect(end.embedding).toHaveLength(REF_CONFIG.hiddenSize);
    expect(end.usage).toMatchObject({ promptTokens: PROMPT.length, completionTokens: 0 });
    expect(generated.at(-1)?.type).toBe('finished');
    expect(pool.ledger.counts().allocated).toBe(0);

    // The reference: the whole prompt in one plain step; its last row's logits.
    const ref = await engine();
    const owner = { rid: asRequestId('ref'), tenant: DEFAULT_TENANT };
    const pages = ref.pool.ledger.allocate(4, owner);
    if (pages.kind !== 'allocated') throw new Error('pool');
    const [out] = await ref.runner.step([
      { ...owner, tags: pages.tags, tokens: PROMPT, startPos: 0, wantLogits: true },
    ]);
    if (out?.kind !== 'logits') throw new Error('no logits');
    const logits = await dense.matmul(weights.lmHead, end.embedding, 1, new Float32Array(REF_CONFIG.vocabSize));
    expect(Array.from(logits)).toEqual(Array.from(out.logits));

    // Again, now from the prefix cache: the same state.
    const again = (await run(w, PROMPT, true))[0];
    expect(again?.type === 'finished' && again.embedding).toEqual(end.embedding);
  });
});
