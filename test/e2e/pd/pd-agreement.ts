// The PD-agreement suite: one model through disaggregated `tessera up` against co-located
// `tessera serve` (both --deterministic), the pattern of echo.test.ts. A prompt's
// log-probabilities (prefill's KV carried to decode) and a greedy chat answer must be the same,
// number for number, on both. moe.test.ts and gpt-oss.test.ts each run it with their own model;
// what differs between them is only the model and how long the greedy answer must be.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genModel, type GenDType, type GenPreset } from '../../../src/gen/index.js';
import type { Server } from '../support/process.js';
import { promptIds, testHome, upBesideServe, type UpBesideServe } from './support.js';

export interface PdAgreementModel {
  /** What the describe block is named for, e.g. 'qwen3moe'. */
  readonly name: string;
  /** gen-model's preset and weight dtype; the file is written to the test home as `${preset}-${dtype}.gguf`. */
  readonly preset: GenPreset;
  readonly dtype: GenDType;
  /**
   * 'all': the greedy chat answer runs to max_tokens (16); 'some': it may end early at the
   * model's own stop (harmony's end tokens), so only a non-empty answer is required.
   */
  readonly chatTokens: 'all' | 'some';
}

export function pdAgreementSuite(spec: PdAgreementModel): void {
  let home: Awaited<ReturnType<typeof testHome>>;
  let up: UpBesideServe;
  let colocated: Server;
  let pd: OpenAI;
  let model: string;

  beforeAll(async () => {
    home = await testHome();
    model = join(home.dir, `${spec.preset}-${spec.dtype}.gguf`);
    await genModel({ preset: spec.preset, format: 'gguf', out: model, seed: 2, dtype: spec.dtype });
    up = await upBesideServe(['--model', model, '--deterministic', '--context-length', '256'], home.dir);
    ({ colocated, pd } = up);
  });
  afterAll(async () => {
    await up?.stop();
    await home?.remove();
  });

  describe(`${spec.name} through tessera up`, () => {
    it("scores a prompt's tokens as co-located serve does (prefill's KV carried to decode)", async () => {
      const body = { model, prompt: [promptIds(70)], max_tokens: 4, logprobs: 1, echo: true, temperature: 0 };
      const [ours, reference] = await Promise.all([
        pd.completions.create(body),
        colocated.client().completions.create(body),
      ]);
      const lp = ours.choices[0]?.logprobs as unknown as { token_logprobs: (number | null)[] };
      expect(lp.token_logprobs).toHaveLength(74);
      expect(ours.choices[0]?.logprobs).toEqual(reference.choices[0]?.logprobs);
      expect(ours.choices[0]?.text).toBe(reference.choices[0]?.text);
    });

    it('answers a chat greedily with the same tokens as co-located serve', async () => {
      const body = {
        model,
        messages: [{ role: 'user' as const, content: 'Name three colours.' }],
        max_tokens: 16,
        temperature: 0,
      };
      const [ours, reference] = await Promise.all([
        pd.chat.completions.create(body),
        colocated.client().chat.completions.create(body),
      ]);
      expect(ours.usage).toEqual(reference.usage);
      if (spec.chatTokens === 'all') expect(ours.usage?.completion_tokens).toBe(16);
      else expect(ours.usage?.completion_tokens).toBeGreaterThan(0);
      expect(ours.choices[0]?.message.content).toBe(reference.choices[0]?.message.content);
    });
  });
}
