// What agent frameworks do, against real `tessera serve` and `tessera up` processes on the
// shipped model (builtin:austen): Vercel's AI SDK (`ai` 7 with @ai-sdk/openai's chat,
// completion and Responses models and @ai-sdk/openai-compatible) and LangChain
// (@langchain/openai, chat completions and the Responses API). generateText, streamText,
// Output.object with a zod schema, a two-step tool loop (a tool call, its result in the
// history, an answer); withStructuredOutput, bindTools, streamed tool calls. Every structured
// result validates against its schema (ajv, on the schema the SDK itself sent, and zod).
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { tool as lcTool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, Output, stepCountIs, streamText, tool } from 'ai';
import { Ajv2020 as Ajv } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useUpBesideServe } from './support.js';

const MODEL = 'builtin:austen';
const ARGS = ['--model', MODEL, '--deterministic'];

const up = useUpBesideServe(ARGS);
const urls: Record<'serve' | 'up', string> = {
  get serve() {
    return up.colocated.url;
  },
  get up() {
    return up.routerUrl;
  },
};

const ajv = new Ajv({ strict: false });
const Person = z.object({
  name: z.string().max(16),
  age: z.number().int().min(0).max(120),
  mood: z.enum(['happy', 'vexed', 'proud']),
});
const Weather = z.object({ city: z.string().max(12) });
const validatesAgainst = (schema: z.ZodType, value: unknown): boolean =>
  ajv.validate(z.toJSONSchema(schema), value) && schema.safeParse(value).success;

describe.each(['serve', 'up'] as const)('the AI SDK against tessera %s', (target) => {
  const openai = () => createOpenAI({ baseURL: `${urls[target]}/v1`, apiKey: 'none' });
  const compat = () =>
    createOpenAICompatible({
      name: 'tessera',
      baseURL: `${urls[target]}/v1`,
      apiKey: 'none',
      supportsStructuredOutputs: true,
    });

  it('generateText with the chat, completion, Responses and openai-compatible models', async () => {
    const models = [openai().chat(MODEL), openai().completion(MODEL), openai()(MODEL), compat().chatModel(MODEL)];
    for (const model of models) {
      const result = await generateText({ model, prompt: 'Who is Mr. Darcy?', maxOutputTokens: 16, temperature: 0 });
      expect(result.text.length).toBeGreaterThan(0);
      expect(result.finishReason).toBe('length');
      expect(result.usage.outputTokens).toBe(16);
    }
  });

  it('streamText streams the same text generateText returns (chat and Responses)', async () => {
    for (const model of [openai().chat(MODEL), openai()(MODEL)]) {
      const whole = await generateText({ model, prompt: 'Elizabeth walked', maxOutputTokens: 12, temperature: 0 });
      const stream = streamText({ model, prompt: 'Elizabeth walked', maxOutputTokens: 12, temperature: 0 });
      let text = '';
      for await (const part of stream.textStream) text += part;
      expect(text).toBe(whole.text);
    }
  });

  it('Output.object with a zod schema validates (Responses, chat, openai-compatible)', async () => {
    for (const model of [openai()(MODEL), openai().chat(MODEL), compat().chatModel(MODEL)]) {
      const result = await generateText({
        model,
        output: Output.object({ schema: Person }),
        prompt: 'Describe Mr. Darcy.',
        maxOutputTokens: 80,
        temperature: 0,
      });
      expect(validatesAgainst(Person, result.output)).toBe(true);
    }
  });

  it('runs a two-step tool loop: a required call, its result in the history, then an answer', async () => {
    for (const model of [openai().chat(MODEL), openai()(MODEL)]) {
      const calls: unknown[] = [];
      const result = await generateText({
        model,
        tools: {
          getWeather: tool({
            description: 'The weather in a city',
            inputSchema: Weather,
            execute: async (input) => (calls.push(input), { sky: 'grey' }),
          }),
        },
        toolChoice: 'required',
        prepareStep: ({ stepNumber }) => (stepNumber === 1 ? { toolChoice: 'none' } : {}),
        stopWhen: stepCountIs(2),
        prompt: 'What is the weather in Bath?',
        // austen's vocabulary has few JSON merges: the call is spelled out in ~50 tokens.
        maxOutputTokens: 80,
        temperature: 0,
      });
      expect(result.steps).toHaveLength(2);
      expect(result.steps[0]?.toolCalls.map((c) => c.toolName)).toEqual(['getWeather']);
      expect(calls).toHaveLength(1);
      expect(validatesAgainst(Weather, calls[0])).toBe(true);
      expect(result.steps[1]?.toolCalls).toEqual([]);
      expect(result.steps[1]?.text.length).toBeGreaterThan(0);
    }
  });
});

describe.each(['serve', 'up'] as const)('LangChain against tessera %s', (target) => {
  const chat = (extra: object = {}) =>
    new ChatOpenAI({
      model: MODEL,
      apiKey: 'none',
      configuration: { baseURL: `${urls[target]}/v1` },
      temperature: 0,
      maxTokens: 80,
      ...extra,
    });
  const weather = lcTool(async ({ city }: { city: string }) => `grey in ${city}`, {
    name: 'get_weather',
    description: 'The weather in a city',
    schema: Weather,
  });

  it('withStructuredOutput validates (chat completions and the Responses API)', async () => {
    for (const model of [chat(), chat({ useResponsesApi: true })]) {
      const person = await model.withStructuredOutput(Person).invoke('Describe Mr. Darcy.');
      expect(validatesAgainst(Person, person)).toBe(true);
    }
  });

  it('bindTools with a required call gives tool_calls whose arguments validate', async () => {
    const message = await chat()
      .bindTools([weather], { tool_choice: 'required' })
      .invoke('What is the weather in Bath?');
    expect(message.tool_calls?.map((c) => c.name)).toEqual(['get_weather']);
    expect(validatesAgainst(Weather, message.tool_calls?.[0]?.args)).toBe(true);
  });

  it('streams a named tool call as argument deltas that add up to valid arguments', async () => {
    const stream = await chat()
      .bindTools([weather], { tool_choice: 'get_weather' })
      .stream('What is the weather in Bath?');
    let joined: Awaited<ReturnType<typeof stream.next>>['value'] | undefined;
    let numChunks = 0;
    for await (const chunk of stream) {
      numChunks++;
      joined = joined === undefined ? chunk : joined.concat(chunk);
    }
    expect(numChunks).toBeGreaterThan(2);
    expect(joined?.tool_calls?.map((c: { name: string }) => c.name)).toEqual(['get_weather']);
    expect(validatesAgainst(Weather, joined?.tool_calls?.[0]?.args)).toBe(true);
  });
});
