// The shipped model (builtin:austen, what `npm start` serves) through `tessera up` and co-located
// `tessera serve`, both --deterministic. A trained model's distributions are peaked but not
// one-hot, which is where presence and frequency penalties show (on the random-weight test
// models no penalty in [-2, 2] moves an argmax): a penalized greedy answer repeats itself less,
// and PD stays transparent with penalties on (prefill samples the first output token, with no
// output yet to penalize; decode samples the rest from the output it holds), and for `n` sampled
// choices.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../support/process.js';
import { spawnTessera, useTestHome, type Proc } from './support.js';

const MODEL = 'builtin:austen';
const ARGS = ['--model', MODEL, '--deterministic'];
const PROMPT = 'It is a truth universally acknowledged';

const home = useTestHome();
let cluster: Proc;
let colocated: Server;
let routerUrl: string;

beforeAll(async () => {
  cluster = spawnTessera('up', ['up', '--port', '0', ...ARGS], home.dir);
  [colocated, routerUrl] = await Promise.all([
    startServer(ARGS, home.dir),
    cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/).then((m) => m[1] as string),
  ]);
});
afterAll(async () => {
  await Promise.all([cluster?.stop(), colocated?.stop()]);
});

async function greedy(client: OpenAI, extra: object = {}): Promise<number[]> {
  const body = {
    model: MODEL,
    prompt: PROMPT,
    max_tokens: 64,
    temperature: 0,
    ignore_eos: true,
    return_token_ids: true,
    ...extra,
  };
  const response = (await client.completions.create(body as never)) as unknown as {
    choices: { token_ids: number[] }[];
  };
  return response.choices[0]?.token_ids ?? [];
}

const repeats = (ids: readonly number[]): number => ids.length - new Set(ids).size;
const PENALTIES = { presence_penalty: 0.5, frequency_penalty: 1.5 };

describe('builtin:austen, co-located and disaggregated', () => {
  it('repeats itself less under presence and frequency penalties', async () => {
    const co = colocated.client();
    const [plain, penalized] = [await greedy(co), await greedy(co, PENALTIES)];
    expect(plain).toHaveLength(64);
    expect(penalized).toHaveLength(64);
    expect(repeats(penalized)).toBeLessThan(repeats(plain) / 2);
  });

  it('is transparent through tessera up, with penalties and without', async () => {
    const pd = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
    const co = colocated.client();
    expect(await greedy(pd)).toEqual(await greedy(co));
    expect(await greedy(pd, PENALTIES)).toEqual(await greedy(co, PENALTIES));
    // n sampled choices: each its own request through the cluster, with seed + i.
    const sampled = { model: MODEL, prompt: PROMPT, max_tokens: 24, temperature: 0.9, seed: 3, n: 3 };
    const texts = async (client: OpenAI) =>
      ((await client.completions.create(sampled as never)) as OpenAI.Completion).choices.map((c) => c.text);
    const viaPd = await texts(pd);
    expect(viaPd).toHaveLength(3);
    expect(new Set(viaPd).size).toBe(3);
    expect(viaPd).toEqual(await texts(co));
  });

  it("reports the model's log-probabilities, the same through tessera up (the first token's come from prefill in KvDone)", async () => {
    const pd = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
    const body = {
      model: MODEL,
      messages: [{ role: 'user' as const, content: 'Who is Mr. Darcy?' }],
      max_tokens: 12,
      temperature: 0,
      logprobs: true,
      top_logprobs: 5,
    };
    const [viaPd, viaColocated] = [
      await pd.chat.completions.create(body),
      await colocated.client().chat.completions.create(body),
    ];
    const content = viaColocated.choices[0]?.logprobs?.content ?? [];
    expect(content).toHaveLength(12);
    for (const entry of content) {
      // Greedy: the token is the most likely one; the alternatives come most likely first and are a distribution's.
      expect(entry.top_logprobs).toHaveLength(5);
      expect(entry.top_logprobs[0]?.logprob).toBe(entry.logprob);
      expect(entry.top_logprobs.map((t) => t.logprob)).toEqual(
        [...entry.top_logprobs.map((t) => t.logprob)].sort((a, b) => b - a),
      );
      expect(entry.top_logprobs.reduce((sum, t) => sum + Math.exp(t.logprob), 0)).toBeLessThanOrEqual(1 + 1e-9);
      expect(entry.logprob).toBeLessThanOrEqual(0);
    }
    expect(content.map((e) => e.token).join('')).toBe(viaColocated.choices[0]?.message.content);
    expect(viaPd.choices[0]?.logprobs).toEqual(viaColocated.choices[0]?.logprobs);
  });
});
