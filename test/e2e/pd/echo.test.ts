// A prompt's own log-probabilities through disaggregated `tessera up` (prefill computes them in
// its prompt chunks, KvDone carries them to decode, decode's first Tokens to the router), against
// co-located `tessera serve`, both --deterministic on builtin:tiny, with the official openai
// client in lm-evaluation-harness's loglikelihood shape (echo, logprobs, max_tokens 1 or 0): the
// same answers, number for number; and vLLM's prompt_logprobs; streamed, the same as the JSON answer. Embeddings are refused there (co-located only).
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { jsonChoices, joinCompletionStream } from '../support/completion-stream.js';
import { promptIds, useUpBesideServe } from './support.js';

const MODEL = 'builtin:tiny';
const ARGS = ['--model', MODEL, '--deterministic', '--context-length', '256'];

const up = useUpBesideServe(ARGS);

describe('echo and prompt_logprobs through tessera up', () => {
  it('answer what co-located serve answers, the first prompt token null, every other scored', async () => {
    // 150 tokens: the prompt spans several chunks of PROMPT_LOGIT_ROWS + 1 on the prefill node.
    const prompts = [promptIds(150), promptIds(9, 77)];
    const body = { model: MODEL, prompt: prompts, max_tokens: 1, logprobs: 1, echo: true, temperature: 0 };
    const [ours, reference] = await Promise.all([
      up.pd.completions.create(body),
      up.colocated.client().completions.create(body),
    ]);
    expect(ours.choices).toHaveLength(2);
    for (const choice of ours.choices) {
      const lp = choice.logprobs as unknown as { token_logprobs: (number | null)[]; top_logprobs: unknown[] };
      const n = (prompts[choice.index] as number[]).length;
      expect(lp.token_logprobs).toHaveLength(n + 1);
      expect(lp.token_logprobs[0]).toBeNull();
      expect(lp.token_logprobs.slice(1).every((v) => typeof v === 'number' && v <= 0)).toBe(true);
      const same = reference.choices.find((c) => c.index === choice.index);
      expect(choice.logprobs).toEqual(same?.logprobs);
      expect(choice.text).toBe(same?.text);
    }
    expect(ours.usage).toMatchObject({ completion_tokens: 2 });
  });

  it('take max_tokens 0 (the prompt alone) and prompt_logprobs as serve does', async () => {
    const body = { model: MODEL, prompt: promptIds(40, 5), max_tokens: 0, prompt_logprobs: 3, logprobs: 0, echo: true };
    const [ours, reference] = await Promise.all([
      up.pd.completions.create(body as never),
      up.colocated.client().completions.create(body as never),
    ]);
    const o = ours as unknown as {
      choices: { prompt_logprobs: unknown[]; logprobs: unknown; finish_reason: string }[];
    };
    const r = reference as unknown as typeof o;
    expect(o.choices[0]?.prompt_logprobs).toHaveLength(40);
    expect(o.choices[0]?.prompt_logprobs[0]).toBeNull();
    expect(o.choices[0]?.prompt_logprobs).toEqual(r.choices[0]?.prompt_logprobs);
    expect(o.choices[0]?.logprobs).toEqual(r.choices[0]?.logprobs);
    expect(o.choices[0]?.finish_reason).toBe('length');
    expect(ours.usage?.completion_tokens).toBe(0);
  });

  it('stream echo + logprobs and prompt_logprobs as the JSON answer, joined chunk by chunk', async () => {
    const prompts = [promptIds(150), promptIds(9, 77)];
    for (const c of [
      { max_tokens: 3, logprobs: 1, echo: true, prompt: prompts },
      { max_tokens: 0, prompt_logprobs: 2, logprobs: 0, echo: true, prompt: promptIds(40, 5) },
    ]) {
      const body = { model: MODEL, temperature: 0, ...c };
      const [json, stream] = await Promise.all([
        up.pd.completions.create(body as never) as Promise<OpenAI.Completions.Completion>,
        up.pd.completions.create({ ...body, stream: true } as never) as unknown as Promise<
          AsyncIterable<OpenAI.Completions.Completion>
        >,
      ]);
      expect(await joinCompletionStream(stream)).toEqual(jsonChoices(json));
    }
  });

  it('refuses /v1/embeddings with a 400 that says co-located serve answers them', async () => {
    const e = await up.pd.embeddings.create({ model: MODEL, input: 'x' }).catch((error: unknown) => error);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect(String((e as Error).message)).toMatch(/tessera serve/);
  });
});
