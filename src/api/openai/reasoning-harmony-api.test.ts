// --reasoning-parser gpt-oss through the HTTP API and the official openai client, over a back end
// that answers in harmony (special tokens in its text, as a gpt-oss server's detokenizer keeps
// them): chat's `reasoning_content` and content, whole and as their own streamed deltas; a
// commentary call to an offered function as `tool_calls` (finish "tool_calls"); the Responses
// API's reasoning item beside its message.
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateEvent, GenerateRequest } from '../../core/index.js';
import { startSdkTestServer, type TestServer } from '../testing/harness.js';

const ANALYSIS = '<|channel|>analysis<|message|>Weather needs a tool call.<|end|>';
const FINAL = '<|start|>assistant<|channel|>final<|message|>Sunny in Oslo.<|return|>';
const CALL =
  '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>';

/** The answer in 5-character pieces (special tokens cut across them), then `stop`. */
function harmonyScript(text: string) {
  return async function* (request: GenerateRequest): AsyncIterable<GenerateEvent> {
    let n = 0;
    for (let i = 0; i < text.length; i += 5, n++) yield { type: 'tokens', ids: [100 + n], text: text.slice(i, i + 5) };
    yield {
      type: 'finished',
      finishReason: 'stop',
      usage: { promptTokens: request.promptTokens.length, completionTokens: n, cachedTokens: 0 },
    };
  };
}

const TOOLS = [
  {
    type: 'function' as const,
    function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
];

let t: TestServer;
let client: OpenAI;
beforeAll(async () => {
  ({ t, client } = await startSdkTestServer({ contextLength: 4096, reasoningParser: 'gpt-oss' }));
});
afterAll(async () => {
  await t.close();
});

describe('gpt-oss (harmony) answers through the API', () => {
  it('chat: analysis as reasoning_content, final as content', async () => {
    t.backend.script = harmonyScript(ANALYSIS + FINAL);
    const r = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(r.choices[0]?.message).toMatchObject({
      content: 'Sunny in Oslo.',
      reasoning_content: 'Weather needs a tool call.',
    });
  });

  it('chat streamed: reasoning and content come as their own deltas, no special token in either', async () => {
    t.backend.script = harmonyScript(ANALYSIS + FINAL);
    const stream = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const reasoning: string[] = [];
    const content: string[] = [];
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
      if (delta?.reasoning_content) reasoning.push(delta.reasoning_content);
      if (delta?.content) content.push(delta.content);
    }
    expect(reasoning.length).toBeGreaterThan(1);
    expect(reasoning.join('')).toBe('Weather needs a tool call.');
    expect(content.join('')).toBe('Sunny in Oslo.');
    expect([...reasoning, ...content].join('')).not.toMatch(/<\||\|>/);
  });

  it('chat with tools, streamed: the commentary call is a tool call of get_weather, finish tool_calls', async () => {
    t.backend.script = harmonyScript(ANALYSIS + CALL);
    const stream = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'weather?' }],
      tools: TOOLS,
      stream: true,
    });
    let args = '';
    let name = '';
    let finish: string | null = null;
    let content = '';
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      for (const call of choice?.delta.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
      content += choice?.delta.content ?? '';
      finish = choice?.finish_reason ?? finish;
    }
    expect({ name, args: JSON.parse(args) as unknown, finish, content }).toEqual({
      name: 'get_weather',
      args: { city: 'Oslo' },
      finish: 'tool_calls',
      content: '',
    });
  });

  it('chat with tools, whole: tool_calls, content null, reasoning_content kept', async () => {
    t.backend.script = harmonyScript(ANALYSIS + CALL);
    const r = await client.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'weather?' }],
      tools: TOOLS,
    });
    const message = r.choices[0]?.message;
    expect(r.choices[0]?.finish_reason).toBe('tool_calls');
    expect(message).toMatchObject({ content: null, reasoning_content: 'Weather needs a tool call.' });
    expect(message?.tool_calls?.map((c) => [c.type === 'function' ? c.function.name : '', c.type])).toEqual([
      ['get_weather', 'function'],
    ]);
  });

  it('Responses: a reasoning item, then the message', async () => {
    t.backend.script = harmonyScript(ANALYSIS + FINAL);
    const r = await client.responses.create({ model: 'fake-model', input: 'hi' });
    expect(r.output.map((item) => item.type)).toEqual(['reasoning', 'message']);
    expect(r.output_text).toBe('Sunny in Oslo.');
    expect(JSON.stringify(r.output[0])).toContain('Weather needs a tool call.');
  });
});
