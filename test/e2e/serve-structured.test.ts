// A real `tessera serve` driven by the official openai client (issue 33, finding 6): structured
// outputs that always validate, through the HTTP API.
//   - a function declared without `parameters`, under tool_choice "required", is called with {}
//     (OpenAI reads a missing `parameters` as no parameters), whatever the model samples;
//   - a forced call cut by max_tokens is finish_reason "length" with no half call in the text,
//     whole and streamed; on the Responses API, status "incomplete" with no item marked completed;
//   - fractional number bounds at temperature 1: every "stop" output validates (ajv strict);
//   - keywords Tessera cannot enforce are a 400 naming the keyword.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { strictAjv, validJson } from '../structured/ajv-strict.js';
import { startServer, useTestHome, type Server } from './support/process.js';

const home = useTestHome();
let server: Server;
let client: OpenAI;
let model: string;

beforeAll(async () => {
  server = await startServer(['--context-length', '512', '--kv-pages', '128'], home.dir);
  client = server.client();
  model = (await client.models.list()).data[0]!.id;
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

const SEEDS = [1, 2, 3, 4, 5, 6];
const messages = [{ role: 'user' as const, content: 'Call the tool.' }];
const city = {
  type: 'function' as const,
  function: {
    name: 'weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

describe('tool calls through the openai client', () => {
  it('a function without `parameters` under tool_choice "required" is called with {} (no keys)', async () => {
    const answers = await Promise.all(
      SEEDS.map((seed) =>
        client.chat.completions.create({
          model,
          messages,
          tools: [{ type: 'function', function: { name: 'ping' } }],
          tool_choice: 'required',
          temperature: 1,
          seed,
          max_tokens: 40,
        }),
      ),
    );
    for (const r of answers) {
      const choice = r.choices[0]!;
      expect(choice.finish_reason).toBe('tool_calls');
      const call = choice.message.tool_calls?.[0];
      expect(call?.type === 'function' ? [call.function.name, call.function.arguments] : call).toEqual(['ping', '{}']);
    }
  });

  it('a forced call cut by max_tokens is finish_reason "length", with no half call in the content', async () => {
    const body = { model, messages, tools: [city], tool_choice: 'required' as const, max_tokens: 3, temperature: 0 };
    const whole = await client.chat.completions.create(body);
    expect(whole.choices[0]?.finish_reason).toBe('length');
    expect(whole.choices[0]?.message.content ?? '').not.toContain('[{');
    expect(whole.choices[0]?.message.tool_calls ?? []).toEqual([]);
    let streamed = '';
    let finish: string | null | undefined;
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      streamed += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect([streamed, finish]).toEqual(['', 'length']);
  });

  it('on the Responses API, a cut forced call is "incomplete" with no item marked completed', async () => {
    const body = {
      model,
      input: 'Call the tool.',
      tools: [{ type: 'function' as const, name: 'weather', parameters: city.function.parameters, strict: false }],
      tool_choice: 'required' as const,
      max_output_tokens: 3,
    };
    const whole = await client.responses.create(body);
    expect(whole.status).toBe('incomplete');
    expect(whole.output.filter((item) => 'status' in item && item.status === 'completed')).toEqual([]);
    expect(JSON.stringify(whole.output)).not.toContain('[{\\"name');
    let done: { status?: string; output: unknown[] } | undefined;
    for await (const event of await client.responses.create({ ...body, stream: true }))
      if (event.type === 'response.incomplete' || event.type === 'response.completed') done = event.response;
    expect(done?.status).toBe('incomplete');
    expect(JSON.stringify(done?.output)).not.toContain('"completed"');
  });
});

describe('schemas through the openai client', () => {
  it('minimum 0.5, maximum 1.5 at temperature 1: every "stop" output validates (ajv strict)', async () => {
    const schema = {
      type: 'object',
      properties: { ratio: { type: 'number', minimum: 0.5, maximum: 1.5 }, x: { type: 'number', minimum: -1.25 } },
      required: ['ratio', 'x'],
      additionalProperties: false,
    };
    const validate = strictAjv().compile(schema);
    const answers = await Promise.all(
      SEEDS.map((seed) =>
        client.chat.completions.create({
          model,
          messages: [{ role: 'user', content: 'A ratio.' }],
          response_format: { type: 'json_schema', json_schema: { name: 'r', schema, strict: true } },
          temperature: 1,
          seed,
          max_tokens: 60,
        }),
      ),
    );
    const stopped = answers.filter((r) => r.choices[0]?.finish_reason === 'stop');
    expect(stopped.length).toBeGreaterThan(0);
    expect(stopped.map((r) => r.choices[0]?.message.content).filter((t) => !validJson(validate, t ?? ''))).toEqual([]);
  });

  it.each([
    [{ type: 'number', multipleOf: 0.5 }, 'multipleOf'],
    [{ type: 'string', format: 'email', maxLength: 30 }, 'maxLength'],
    [{ type: 'string', format: 'uri', maxLength: 30 }, 'maxLength'],
  ])('%j is a 400 naming %s', async (leaf, keyword) => {
    const schema = { type: 'object', properties: { v: leaf }, required: ['v'], additionalProperties: false };
    const error = await client.chat.completions
      .create({
        model,
        messages,
        response_format: { type: 'json_schema', json_schema: { name: 'v', schema } },
        max_tokens: 10,
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).message).toContain(`\`${keyword}\``);
  });
});

describe('negative control: a server with the fault point skip-schema-rules', () => {
  let faulty: Server;
  beforeAll(async () => {
    faulty = await startServer(['--context-length', '512', '--kv-pages', '128'], home.dir, {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'skip-schema-rules',
    });
  }, 120_000);
  afterAll(async () => {
    await faulty?.stop();
  });

  it('answers minimum 0.5, maximum 1.5 with completed outputs that do not validate, and multipleOf without a 400', async () => {
    const c = faulty.client();
    const schema = {
      type: 'object',
      properties: { ratio: { type: 'number', minimum: 0.5, maximum: 1.5 } },
      required: ['ratio'],
      additionalProperties: false,
    };
    const validate = strictAjv().compile(schema);
    const answers = await Promise.all(
      SEEDS.map((seed) =>
        c.chat.completions.create({
          model,
          messages: [{ role: 'user', content: 'A ratio.' }],
          response_format: { type: 'json_schema', json_schema: { name: 'r', schema } },
          temperature: 1,
          seed,
          max_tokens: 60,
        }),
      ),
    );
    const stopped = answers.filter((r) => r.choices[0]?.finish_reason === 'stop');
    expect(stopped.filter((r) => !validJson(validate, r.choices[0]?.message.content ?? '')).length).toBeGreaterThan(0);
    const multiple = { type: 'object', properties: { v: { type: 'number', multipleOf: 0.5 } }, required: ['v'] };
    const r = await c.chat.completions.create({
      model,
      messages,
      response_format: { type: 'json_schema', json_schema: { name: 'v', schema: multiple } },
      max_tokens: 5,
    });
    expect(r.choices).toHaveLength(1);
  });
});
