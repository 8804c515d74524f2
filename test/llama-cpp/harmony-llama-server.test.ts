// gpt-oss's harmony format, Tessera against llama.cpp's llama-server (built natively from the
// source node-llama-cpp ships: scripts/build-llama.mjs, cached under bench/results/llama-native/),
// both real processes on one GGUF: gen-model's gpt-oss-tiny (o200k, random weights) carrying
// gpt-oss's own chat template (fixtures/gpt-oss-chat-template.jinja: llama.cpp's copy,
// models/templates/openai-gpt-oss-120b.jinja, at the bundled commit), llama-server run with
// --jinja and --reasoning-format auto.
//   Rendering: the same conversation (system, developer, user, an assistant turn with reasoning
//     and a tool call, the tool's result; tools offered) through Tessera's /tokenize (then
//     /detokenize) and llama-server's /apply-template: the same text, and the same token ids as
//     llama-server's /tokenize of its own text.
//   Parsing: both servers made to emit the same harmony answer. llama-server by a GBNF grammar
//     that allows exactly that text; Tessera by its `forced-answer` fault point (the ids of that
//     text, from llama-server's /tokenize, one per step in place of the sampled ones). Their
//     reasoning_content and content agree, whole and streamed (the deltas joined, each kind in
//     its own deltas). llama-server refuses a grammar beside `tools` ("Cannot use custom grammar
//     constraints with tools."), and nothing else forces its output, so a tool call is checked
//     against llama.cpp's side of the format instead: Tessera, made to emit the tool-call turn as
//     llama-server's /apply-template writes it, returns that call (name, arguments, the reasoning
//     before it), whole and streamed.
// Nothing is skipped: a machine that cannot build llama-server (cmake, g++, git) fails here.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genModel } from '../../src/gen/index.js';
import { ROOT, startServer, useTestHome, type Server } from '../e2e/support/process.js';

const TEMPLATE = readFileSync(new URL('./fixtures/gpt-oss-chat-template.jinja', import.meta.url), 'utf8');
const BUILD = join(ROOT, 'scripts', 'build-llama.mjs');

const TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' }, days: { type: 'integer' } },
        required: ['city'],
      },
    },
  },
];

/** Every role, reasoning on the last assistant turn (the template keeps it before a tool call), a tool result. */
const CONVERSATION = [
  { role: 'system', content: 'You are brief.' },
  { role: 'developer', content: 'Answer in French.' },
  { role: 'user', content: 'Weather in Oslo?' },
  {
    role: 'assistant',
    content: null,
    reasoning_content: 'The user wants the weather; call the tool.',
    tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo","days":2}' } },
    ],
  },
  { role: 'tool', tool_call_id: 'call_1', content: '{"sky":"clear","temp_c":4}' },
];

const USER = [{ role: 'user' as const, content: 'Name a colour.' }];

/** The answers both servers are made to emit (the generation prompt `<|start|>assistant` precedes them). */
const ANSWERS = [
  // analysis, then final
  '<|channel|>analysis<|message|>The user wants a colour. Pick red.<|end|>' +
    '<|start|>assistant<|channel|>final<|message|>Red, like "ruby".',
  // analysis, a commentary preamble (no recipient: content), final
  '<|channel|>analysis<|message|>Think first.<|end|>' +
    '<|start|>assistant<|channel|>commentary<|message|>Checking the list.<|end|>' +
    '<|start|>assistant<|channel|>final<|message|>Done: blue.',
];
const TOOL_SEED = ANSWERS.length;
/** Tessera emits each answer ending in <|return|> (gpt-oss's end of reply); llama-server's grammar ends at the text. */
const RETURN = '<|return|>';

let dir = '';
let llama: ChildProcess | undefined;
let llamaLog = '';
let llamaUrl = '';
let tessera: Server;
let modelId = '';
/** llama-server's rendering of an assistant turn holding CONVERSATION's call (after `<|start|>assistant`). */
let toolTurn = '';

const home = useTestHome();

async function post(path: string, body: unknown, base = llamaUrl): Promise<Record<string, unknown>> {
  const r = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await r.json()) as Record<string, unknown>;
  if (r.status !== 200) throw new Error(`${base}${path}: ${r.status} ${JSON.stringify(json)}`);
  return json;
}

/** llama-server's token ids for `text`, special tokens read as such. */
async function llamaTokens(text: string): Promise<number[]> {
  return (await post('/tokenize', { content: text, parse_special: true })).tokens as number[];
}

async function startLlama(model: string): Promise<void> {
  const built = spawnSync(process.execPath, [BUILD], { cwd: ROOT, encoding: 'utf8', timeout: 40 * 60_000 });
  if (built.status !== 0) throw new Error(`scripts/build-llama.mjs failed (${built.status}): ${built.stderr}`);
  const bin = built.stdout.trim().split('\n').pop() as string;
  const args = ['-m', model, '--jinja', '--reasoning-format', 'auto', '-c', '2048', '-np', '1', '-t', '1'];
  const child = spawn(join(bin, 'llama-server'), [...args, '--host', '127.0.0.1', '--port', '0', '--no-webui'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  llama = child;
  llamaUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`llama-server did not listen:\n${llamaLog}`)), 120_000);
    const look = (d: Buffer): void => {
      llamaLog += d.toString();
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(llamaLog);
      if (m !== null) (clearTimeout(timer), resolve(m[1] as string));
    };
    child.stdout?.on('data', look);
    child.stderr?.on('data', look);
    child.on('exit', (code) => reject(new Error(`llama-server exited ${code}:\n${llamaLog}`)));
  });
  for (let i = 0; i < 600; i++) {
    if (
      await fetch(`${llamaUrl}/health`).then(
        (r) => r.status === 200,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`llama-server never became healthy:\n${llamaLog}`);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tessera-harmony-'));
  const model = join(dir, 'gpt-oss-tiny.gguf');
  await genModel({ preset: 'gpt-oss-tiny', format: 'gguf', out: model, seed: 3, chatTemplate: TEMPLATE });
  await startLlama(model);
  // The tool-call turn as llama.cpp writes it: the conversation's rendering between the user's turn and the tool's.
  const before = (await post('/apply-template', { messages: CONVERSATION.slice(0, 3), tools: TOOLS })).prompt as string;
  const whole = (await post('/apply-template', { messages: CONVERSATION, tools: TOOLS })).prompt as string;
  const result = whole.indexOf('<|start|>functions.get_weather');
  if (!whole.startsWith(before) || result < 0) throw new Error(`unexpected rendering of the tool-call turn:\n${whole}`);
  toolTurn = whole.slice(before.length, result);
  const forced = await Promise.all([...ANSWERS.map((a) => a + RETURN), toolTurn].map(llamaTokens));
  tessera = await startServer(['--model', model, '--context-length', '2048', '--kv-pages', '256'], home.dir, {
    TESSERA_ALLOW_FAULTS: '1',
    TESSERA_FAULT: 'forced-answer',
    TESSERA_FORCED_TOKENS: JSON.stringify(forced),
  });
  modelId = (await tessera.client().models.list()).data[0]!.id;
}, 45 * 60_000);

afterAll(async () => {
  await tessera?.stop();
  llama?.kill('SIGTERM');
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

type Message = { content?: string | null; reasoning_content?: string | null; tool_calls?: unknown[] };

interface Streamed {
  reasoning: string;
  content: string;
  /** Deltas that carried both kinds at once (never, from either server). */
  mixed: number;
  calls: Map<number, { name: string; arguments: string }>;
}

async function streamed(client: OpenAI, body: Record<string, unknown>): Promise<Streamed> {
  const out: Streamed = { reasoning: '', content: '', mixed: 0, calls: new Map() };
  const stream = await client.chat.completions.create({ ...body, stream: true } as never);
  for await (const chunk of stream as unknown as AsyncIterable<{ choices: { delta: Record<string, unknown> }[] }>) {
    const delta = chunk.choices[0]?.delta ?? {};
    const r = typeof delta['reasoning_content'] === 'string' ? delta['reasoning_content'] : '';
    const c = typeof delta['content'] === 'string' ? delta['content'] : '';
    if (r !== '' && c !== '') out.mixed++;
    out.reasoning += r;
    out.content += c;
    for (const call of (delta['tool_calls'] ?? []) as {
      index: number;
      function?: { name?: string; arguments?: string };
    }[]) {
      const seen = out.calls.get(call.index) ?? { name: '', arguments: '' };
      seen.name += call.function?.name ?? '';
      seen.arguments += call.function?.arguments ?? '';
      out.calls.set(call.index, seen);
    }
  }
  return out;
}

describe("gpt-oss's chat template: Tessera renders what llama-server renders", () => {
  it('system, developer, user, reasoning and a tool call, the tool result, with tools offered', async () => {
    const body = { messages: CONVERSATION, tools: TOOLS };
    const expected = (await post('/apply-template', body)).prompt as string;
    const ids = (await post('/tokenize', { model: modelId, ...body }, tessera.url)).tokens as number[];
    const text = (await post('/detokenize', { model: modelId, tokens: ids }, tessera.url)).prompt as string;
    // What makes the case: the tools' namespace, the kept reasoning, the call, the result.
    expect(expected).toContain('namespace functions {');
    expect(expected).toContain('<|channel|>analysis<|message|>The user wants the weather; call the tool.<|end|>');
    expect(expected).toContain('<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>');
    expect(expected).toContain('<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>');
    expect(text).toBe(expected);
    expect(ids).toEqual(await llamaTokens(expected));
  });

  it('a plain chat (system and user) too', async () => {
    const body = { messages: [{ role: 'system', content: 'Be terse.' }, ...USER] };
    const expected = (await post('/apply-template', body)).prompt as string;
    const ids = (await post('/tokenize', { model: modelId, ...body }, tessera.url)).tokens as number[];
    expect(ids).toEqual(await llamaTokens(expected));
  });
});

describe("gpt-oss's reasoning parser: Tessera's split is llama-server's (--reasoning-format auto)", () => {
  const llamaClient = (): OpenAI => new OpenAI({ baseURL: `${llamaUrl}/v1`, apiKey: 'none' });
  const grammarOf = (text: string): string => `root ::= ${JSON.stringify(text)}`;

  for (const [seed, answer] of ANSWERS.entries()) {
    it(`answer ${seed}: reasoning_content and content, whole`, async () => {
      const theirs = await llamaClient().chat.completions.create({
        model: 'gpt-oss',
        messages: USER,
        max_tokens: 600,
        temperature: 0,
        grammar: grammarOf(answer),
      } as never);
      const ours = await tessera.client().chat.completions.create({
        model: modelId,
        messages: USER,
        max_tokens: 600,
        seed,
      });
      const a = theirs.choices[0]!.message as Message;
      const b = ours.choices[0]!.message as Message;
      expect(a.reasoning_content).toBeTruthy(); // llama-server did split it
      expect({ reasoning: b.reasoning_content, content: b.content }).toEqual({
        reasoning: a.reasoning_content,
        content: a.content,
      });
      expect(theirs.choices[0]!.finish_reason).toBe('stop');
      expect(ours.choices[0]!.finish_reason).toBe('stop');
    });

    it(`answer ${seed}: the same, streamed (reasoning and content in deltas of their own)`, async () => {
      const theirs = await streamed(llamaClient(), {
        model: 'gpt-oss',
        messages: USER,
        max_tokens: 600,
        temperature: 0,
        grammar: grammarOf(answer),
      });
      const ours = await streamed(tessera.client(), { model: modelId, messages: USER, max_tokens: 600, seed });
      expect(theirs.reasoning).not.toBe('');
      expect({ reasoning: ours.reasoning, content: ours.content }).toEqual({
        reasoning: theirs.reasoning,
        content: theirs.content,
      });
      expect([ours.mixed, theirs.mixed]).toEqual([0, 0]);
    });
  }

  it('a tool call as llama.cpp writes it comes back as that call, the reasoning before it apart', async () => {
    expect(toolTurn).toMatch(
      /^<\|channel\|>analysis<\|message\|>.*<\|end\|><\|start\|>assistant to=functions\.get_weather/,
    );
    const request = {
      model: modelId,
      messages: CONVERSATION.slice(0, 3),
      tools: TOOLS,
      max_tokens: 600,
      seed: TOOL_SEED,
    };
    const ours = await tessera.client().chat.completions.create(request as never);
    const message = ours.choices[0]!.message as unknown as {
      content: string | null;
      reasoning_content?: string;
      tool_calls: { function: { name: string; arguments: string } }[];
    };
    expect(ours.choices[0]!.finish_reason).toBe('tool_calls');
    expect(message.reasoning_content).toBe(CONVERSATION[3]!.reasoning_content);
    expect(message.content ?? '').toBe('');
    expect(message.tool_calls.map((c) => c.function.name)).toEqual(['get_weather']);
    expect(JSON.parse(message.tool_calls[0]!.function.arguments)).toEqual({ city: 'Oslo', days: 2 });
    const stream = await streamed(tessera.client(), request);
    expect(stream.reasoning).toBe(CONVERSATION[3]!.reasoning_content);
    expect(stream.content).toBe('');
    expect([...stream.calls.values()].map((c) => [c.name, JSON.parse(c.arguments) as unknown])).toEqual([
      ['get_weather', { city: 'Oslo', days: 2 }],
    ]);
  });
});
