// Tessera's answers type-check against the official `openai` package's types: chat completions
// (text and tool calls), chat chunks (text and tool-call deltas), Responses (text and function
// calls) and every Responses stream event. Real bodies from the server (over a fake back end)
// are written into a .ts file as typed constants and compiled with tsc's API (object literals
// get excess-property checks, so a misspelled field fails too). Negative control: the same chat
// completion without `refusal` (the field issue 16 found missing) fails to compile.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send, sseData, sseEventData, startTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

const DIR = join(process.cwd(), 'node_modules', '.cache', 'tessera-openai-types');
const WEATHER = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };

/** Scripts the fake back end to answer `text` in two pieces, then stop. */
function answer(text: string): void {
  t.backend.script = async function* (request) {
    const half = Math.floor(text.length / 2);
    yield { type: 'tokens', ids: [1], text: text.slice(0, half) };
    yield { type: 'tokens', ids: [2], text: text.slice(half) };
    yield {
      type: 'finished',
      finishReason: 'stop',
      usage: { promptTokens: request.promptTokens.length, completionTokens: 2, cachedTokens: 0 },
    };
  };
}

function compile(name: string, source: string): string[] {
  mkdirSync(DIR, { recursive: true });
  const file = join(DIR, `${name}.ts`);
  writeFileSync(file, source);
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
  });
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

const typed = (type: string, values: readonly unknown[]): string =>
  values.map((v, i) => `export const v${type.replace(/\W/g, '')}${i}: ${type} = ${JSON.stringify(v)};`).join('\n');

describe('answers against the openai package types', () => {
  it('chat completions, chat chunks, Responses and Responses events type-check', async () => {
    const bodies: Record<string, unknown[]> = { chat: [], chunk: [], response: [], event: [] };
    const chat = { messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 4 };
    answer('Hello there');
    bodies.chat!.push((await send(t.url, 'POST', '/v1/chat/completions', chat)).json);
    bodies.chunk!.push(
      ...sseData((await send(t.url, 'POST', '/v1/chat/completions', { ...chat, stream: true })).text)
        .filter((d) => d !== '[DONE]')
        .map((d) => JSON.parse(d) as unknown),
    );
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: WEATHER } }];
    // tool_choice auto: the fake answer holds a Hermes call (this server has no grammar engine).
    answer('<tool_call>{"name": "get_weather", "arguments": {"city": "Bath"}}</tool_call>');
    bodies.chat!.push((await send(t.url, 'POST', '/v1/chat/completions', { ...chat, tools })).json);
    bodies.chunk!.push(
      ...sseData((await send(t.url, 'POST', '/v1/chat/completions', { ...chat, tools, stream: true })).text)
        .filter((d) => d !== '[DONE]')
        .map((d) => JSON.parse(d) as unknown),
    );
    answer('Good day');
    bodies.response!.push(
      (await send(t.url, 'POST', '/v1/responses', { input: 'Hi', instructions: 'Be brief.', max_output_tokens: 4 }))
        .json,
    );
    const stream = await send(t.url, 'POST', '/v1/responses', {
      input: [{ role: 'user', content: 'Hi' }],
      stream: true,
    });
    bodies.event!.push(...sseEventData(stream.text));
    const rtools = [{ type: 'function', name: 'get_weather', parameters: WEATHER }];
    answer('<tool_call>{"name": "get_weather", "arguments": {"city": "Bath"}}</tool_call>');
    bodies.response!.push((await send(t.url, 'POST', '/v1/responses', { input: 'Weather?', tools: rtools })).json);
    const callStream = await send(t.url, 'POST', '/v1/responses', { input: 'Weather?', tools: rtools, stream: true });
    bodies.event!.push(...sseEventData(callStream.text));

    expect(
      (bodies.chat![1] as { choices: { message: { tool_calls: unknown[] } }[] }).choices[0]?.message.tool_calls,
    ).toHaveLength(1);
    expect((bodies.response![1] as { output: { type: string }[] }).output.map((o) => o.type)).toEqual([
      'function_call',
    ]);
    expect(bodies.event!.map((e) => (e as { type: string }).type)).toContain('response.function_call_arguments.done');
    const source = [
      "import type OpenAI from 'openai';",
      "type Response = Omit<OpenAI.Responses.Response, 'output_text'>;",
      typed('OpenAI.Chat.Completions.ChatCompletion', bodies.chat!),
      typed('OpenAI.Chat.Completions.ChatCompletionChunk', bodies.chunk!),
      typed('Response', bodies.response!),
      typed(
        'OpenAI.Responses.ResponseStreamEvent',
        bodies.event!.map((e) =>
          (e as { type: string }).type === 'response.completed' ||
          (e as { type: string }).type === 'response.created' ||
          (e as { type: string }).type === 'response.in_progress'
            ? { ...(e as object), response: { ...(e as { response: object }).response, output_text: '' } }
            : e,
        ),
      ),
    ].join('\n');
    expect(compile('answers', source)).toEqual([]);

    // Negative control: a chat completion message without `refusal` does not compile.
    const noRefusal = JSON.parse(JSON.stringify(bodies.chat![0])) as {
      choices: { message: Record<string, unknown> }[];
    };
    delete noRefusal.choices[0]!.message['refusal'];
    const errors = compile(
      'no-refusal',
      ["import type OpenAI from 'openai';", typed('OpenAI.Chat.Completions.ChatCompletion', [noRefusal])].join('\n'),
    );
    expect(errors.join('\n')).toMatch(/refusal/);
  }, 60_000);
});
