// Structured outputs through real processes on the shipped model (builtin:austen), co-located
// `tessera serve` and disaggregated `tessera up`, both --deterministic, with the official openai
// client: every answer validates against its schema (ajv), and PD answers equal co-located ones
// token for token: prefill samples the first token under the grammar's first mask (the
// constraint travels in Prefill.sampling), decode rebuilds the grammar state by replaying the
// tokens (the first from KvDone) and samples the rest.
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { useUpBesideServe } from './support.js';

const MODEL = 'builtin:austen';
const ARGS = ['--model', MODEL, '--deterministic'];

const up = useUpBesideServe(ARGS);

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 16 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    mood: { enum: ['happy', 'vexed', 'proud'] },
    friends: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 3 },
  },
  required: ['name', 'age', 'mood', 'friends'],
  additionalProperties: false,
};

const ajv = new Ajv();

function chat(schema: object, temperature: number, seed: number): OpenAI.ChatCompletionCreateParamsNonStreaming {
  return {
    model: MODEL,
    messages: [{ role: 'user', content: 'Describe Mr. Darcy as JSON.' }],
    max_tokens: 120,
    temperature,
    seed,
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'person', schema: schema as Record<string, unknown>, strict: true },
    },
  };
}

describe('structured outputs (response_format), co-located and through tessera up', () => {
  it('returns JSON that validates, and the same tokens through PD, greedy and sampled', async () => {
    const validate = ajv.compile(PERSON);
    for (const [temperature, seed] of [
      [0, 0],
      [1, 7],
      [1, 8],
    ] as const) {
      const [co, viaPd] = [
        await up.colocated.client().chat.completions.create(chat(PERSON, temperature, seed)),
        await up.pd.chat.completions.create(chat(PERSON, temperature, seed)),
      ];
      const text = co.choices[0]?.message.content ?? '';
      expect(co.choices[0]?.finish_reason).toBe('stop');
      expect(validate(JSON.parse(text)), `${text}: ${ajv.errorsText(validate.errors)}`).toBe(true);
      expect(viaPd.choices[0]?.message.content).toBe(text);
      expect(viaPd.usage?.completion_tokens).toBe(co.usage?.completion_tokens);
    }
  });

  it('fractional number bounds (issue 33): every answer validates, and PD gives the same tokens as serve', async () => {
    const RATIO = {
      type: 'object',
      properties: {
        ratio: { type: 'number', minimum: 0.5, maximum: 1.5 },
        x: { type: 'number', exclusiveMinimum: -1.25, maximum: 2 },
      },
      required: ['ratio', 'x'],
      additionalProperties: false,
    };
    const validate = ajv.compile(RATIO);
    for (const seed of [1, 2, 3, 4]) {
      const [co, viaPd] = [
        await up.colocated.client().chat.completions.create(chat(RATIO, 1, seed)),
        await up.pd.chat.completions.create(chat(RATIO, 1, seed)),
      ];
      const text = co.choices[0]?.message.content ?? '';
      expect(co.choices[0]?.finish_reason).toBe('stop');
      expect(validate(JSON.parse(text)), text).toBe(true);
      expect(viaPd.choices[0]?.message.content).toBe(text);
    }
  });

  it('json_object gives a JSON object, or says "length" when the object cannot close within max_tokens', async () => {
    for (const client of [up.colocated.client(), up.pd]) {
      const body = {
        model: MODEL,
        messages: [{ role: 'user' as const, content: 'JSON please' }],
        max_tokens: 3,
        temperature: 0,
        response_format: { type: 'json_object' as const },
      };
      const short = await client.chat.completions.create(body);
      expect(short.choices[0]?.finish_reason).toBe('length');
      expect(short.choices[0]?.message.content?.startsWith('{')).toBe(true);
    }
  });

  it("reports real cached_tokens through tessera up (prefill's prefix cache, via KvDone and Finished), as serve does", async () => {
    const prompt =
      'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. '.repeat(
        3,
      );
    const body = { model: MODEL, prompt, max_tokens: 2, temperature: 0 };
    for (const client of [up.colocated.client(), up.pd]) {
      await client.completions.create(body);
      const again = await client.completions.create(body);
      const cached =
        (again.usage as { prompt_tokens_details?: { cached_tokens: number } }).prompt_tokens_details?.cached_tokens ??
        0;
      expect(cached).toBeGreaterThan(0);
      expect(cached).toBeLessThanOrEqual(again.usage?.prompt_tokens ?? 0);
    }
  });

  it('refuses a schema it cannot enforce with a 400 naming the field, before any back-end work', async () => {
    for (const client of [up.colocated.client(), up.pd]) {
      const bad = client.chat.completions.create(
        chat({ type: 'object', properties: { a: { type: 'string', pattern: '(' } } }, 0, 0),
      );
      await expect(bad).rejects.toMatchObject({ status: 400, param: 'response_format' });
      const badShape = client.chat.completions.create({
        ...chat(PERSON, 0, 0),
        response_format: { type: 'yaml' } as never,
      });
      await expect(badShape).rejects.toMatchObject({ status: 400, param: 'response_format.type' });
    }
  });
});
