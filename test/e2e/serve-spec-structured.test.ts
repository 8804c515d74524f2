// Structured outputs under speculative decoding, through a real `tessera serve` and the official
// openai client, on the shipped Austen model (a trained model that quotes what it read, so prompt
// lookup drafts inside the JSON strings): a json_schema answer and a forced tool call are token
// for token the same with speculation on (the default) and off (--spec-max-draft 0), drafts were
// verified under the grammar's masks (some accepted), and every answer validates.
// Negative control: fault skip-grammar-rollback leaves the drafts accepted in the matcher, so the
// verified tokens reach it twice: the same requests then fail or answer differently.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { strictAjv, validJson } from '../structured/ajv-strict.js';
import { startServer, testHome, type Server } from './support/process.js';

const MODEL = 'builtin:austen';
const TEXT =
  'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. ' +
  'However little known the feelings or views of such a man may be on his first entering a neighbourhood, this truth is so ' +
  'well fixed in the minds of the surrounding families.';
const QUOTE_SCHEMA = {
  type: 'object',
  properties: { quote: { type: 'string' } },
  required: ['quote'],
  additionalProperties: false,
} as const;
/** A bounded quote: the answer closes within max_tokens (so it ends `stop` and validates). */
const SHORT_QUOTE_SCHEMA = {
  type: 'object',
  properties: { quote: { type: 'string', maxLength: 40 } },
  required: ['quote'],
  additionalProperties: false,
} as const;
const TOOL = {
  type: 'function' as const,
  function: { name: 'remember', parameters: QUOTE_SCHEMA },
};

let home: Awaited<ReturnType<typeof testHome>>;
let on: Server;
let off: Server;
let broken: Server;

beforeAll(async () => {
  home = await testHome();
  const args = ['--model', MODEL, '--kv-pages', '96'];
  [on, off, broken] = await Promise.all([
    startServer(args, home.dir),
    startServer([...args, '--spec-max-draft', '0'], home.dir),
    startServer(args, home.dir, { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'skip-grammar-rollback' }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([on?.stop(), off?.stop(), broken?.stop()]);
  await home?.remove();
});

const messages = [
  { role: 'user' as const, content: `${TEXT}\n\n{"quote":"It is a truth universally acknowledged, that a single man` },
];

type Ask = (server: Server) => Promise<OpenAI.Chat.Completions.ChatCompletion>;
const asks: Record<string, Ask> = {
  json_schema: (server) =>
    server.client().chat.completions.create({
      model: MODEL,
      messages,
      temperature: 0,
      max_tokens: 48,
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'quote', schema: SHORT_QUOTE_SCHEMA, strict: true },
      },
    }),
  tool_call: (server) =>
    server.client().chat.completions.create({
      model: MODEL,
      messages,
      temperature: 0,
      max_tokens: 48,
      tools: [TOOL],
      tool_choice: 'required',
    }),
};

/** The JSON the answer carries: the content, or the one tool call's arguments. */
function jsonOf(r: OpenAI.Chat.Completions.ChatCompletion): string | undefined {
  const message = r.choices[0]?.message;
  const call = message?.tool_calls?.[0];
  return call?.type === 'function' ? call.function.arguments : (message?.content ?? undefined);
}

async function speculation(server: Server): Promise<{ draftTokens: number; acceptedTokens: number }> {
  const health = (await (await fetch(`${server.url}/health`)).json()) as {
    speculation: { draftTokens: number; acceptedTokens: number };
  };
  return health.speculation;
}

describe('structured outputs with speculative decoding', () => {
  it('json_schema and a forced tool call: the same tokens with speculation on and off, drafts verified under the mask', async () => {
    const validators = {
      json_schema: strictAjv().compile(SHORT_QUOTE_SCHEMA),
      tool_call: strictAjv().compile(QUOTE_SCHEMA),
    };
    for (const [kind, ask] of Object.entries(asks)) {
      const before = await speculation(on);
      const [withSpec, without] = await Promise.all([ask(on), ask(off)]);
      const after = await speculation(on);
      expect(jsonOf(withSpec), kind).toBe(jsonOf(without));
      expect(withSpec.choices[0]?.finish_reason, kind).toBe(without.choices[0]?.finish_reason);
      expect(withSpec.choices[0]?.finish_reason, kind).toBe(kind === 'tool_call' ? 'tool_calls' : 'stop');
      const validate = validators[kind as keyof typeof validators];
      expect(validJson(validate, jsonOf(withSpec) ?? ''), `${kind}: ${jsonOf(withSpec)}`).toBe(true);
      expect(after.draftTokens - before.draftTokens, kind).toBeGreaterThan(0);
      expect(after.acceptedTokens - before.acceptedTokens, kind).toBeGreaterThan(0);
    }
  });

  it('fault skip-grammar-rollback: the drafts stay in the matcher, and the answers fail or change', async () => {
    for (const [kind, ask] of Object.entries(asks)) {
      const [expected, got] = await Promise.all([
        ask(off),
        ask(broken).catch((error: unknown) => (error instanceof OpenAI.APIError ? error : Promise.reject(error))),
      ]);
      if (got instanceof OpenAI.APIError) expect(got.message, kind).toMatch(/grammar/);
      else expect(jsonOf(got), kind).not.toBe(jsonOf(expected));
    }
  });
});
