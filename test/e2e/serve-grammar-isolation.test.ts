// Structured outputs that no request can break for others, against a real `tessera serve`:
// a schema nested 200 objects deep is refused (400) and another key's structured request then
// works; with the size limits off (skip-schema-limits) the schema reaches the checker thread,
// traps xgrammar there, and still costs only its own request, while under keep-trapped-grammar
// (the negative control) the other key's request fails. A slow compile runs off the event loop:
// /health keeps answering while it runs (its latencies are printed, not asserted tightly).
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, useTestHome, writeJson, type Server } from './support/process.js';

const KEYS = { 'sk-alice': 'alice', 'sk-bob': 'bob' };
const ARGS = ['--context-length', '256', '--kv-pages', '64'];

function nested(depth: number): Record<string, unknown> {
  let s: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { type: 'object', properties: { a: s }, required: ['a'] };
  return s;
}
const SIMPLE = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false };

function structured(server: Server, key: string, schema: Record<string, unknown>) {
  return server.client(key).chat.completions.create({
    model: 'builtin:tiny',
    messages: [{ role: 'user', content: 'a number' }],
    max_tokens: 24,
    temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'out', schema, strict: true } },
  });
}

/** Bob's simple schema gives JSON that holds an integer n. */
async function bobGetsStructuredOutput(server: Server): Promise<void> {
  const r = await structured(server, 'sk-bob', SIMPLE);
  const choice = r.choices[0] as OpenAI.ChatCompletion.Choice;
  if (choice.finish_reason === 'stop') expect(Number.isInteger(JSON.parse(choice.message.content ?? '').n)).toBe(true);
  else expect(choice.finish_reason).toBe('length');
}

const home = useTestHome();
let keysFile: string;
beforeAll(async () => {
  keysFile = await writeJson(home.dir, 'keys.json', KEYS);
});

function serverWith(faults: readonly string[]): { get(): Server } {
  let server: Server;
  beforeAll(async () => {
    const env: Record<string, string> =
      faults.length === 0 ? {} : { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: faults.join(',') };
    server = await startServer(['--api-keys', keysFile, ...ARGS], home.dir, env);
  });
  afterAll(async () => {
    await server?.stop();
  });
  return { get: () => server };
}

describe('a server with the schema limits on', () => {
  const s = serverWith([]);

  it("answers a schema nested 200 deep 400 naming the limit, and another key's structured request then works", async () => {
    await expect(structured(s.get(), 'sk-alice', nested(200))).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/nesting depth/),
    });
    await bobGetsStructuredOutput(s.get());
  });
});

describe('a server with the schema limits off (skip-schema-limits)', () => {
  const s = serverWith(['skip-schema-limits']);

  it("answers the schema that traps xgrammar 400, and another key's structured requests then work", async () => {
    await expect(structured(s.get(), 'sk-alice', nested(200))).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/memory access out of bounds|Aborted/),
    });
    await bobGetsStructuredOutput(s.get());
    const r = await s
      .get()
      .client('sk-bob')
      .chat.completions.create({
        model: 'builtin:tiny',
        messages: [{ role: 'user', content: 'an object' }],
        max_tokens: 8,
        response_format: { type: 'json_object' },
      });
    expect(r.choices).toHaveLength(1);
  });

  it('keeps answering /health while a slow schema compiles', async () => {
    const properties = Object.fromEntries(
      Array.from({ length: 400 }, (_, i) => [`p${i}`, { type: 'string', pattern: '^[a-z]{3}-[0-9]{4}-[A-Z]{2}$' }]),
    );
    let settled = false;
    const compiling = structured(s.get(), 'sk-alice', { type: 'object', properties }).then(
      () => (settled = true),
      () => (settled = true),
    );
    const started = performance.now();
    const whileCompiling: number[] = [];
    while (!settled) {
      const t = performance.now();
      const response = await fetch(`${s.get().url}/health`);
      expect(response.status).toBe(200);
      if (!settled) whileCompiling.push(performance.now() - t);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await compiling;
    const sorted = [...whileCompiling].sort((a, b) => a - b);
    process.stdout.write(
      `/health during a ${(performance.now() - started).toFixed(0)} ms schema request: ${sorted.length} answers, ` +
        `median ${(sorted[sorted.length >> 1] ?? NaN).toFixed(1)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms\n`,
    );
    expect(whileCompiling.length).toBeGreaterThan(0);
    expect(Math.max(...whileCompiling)).toBeLessThan(1000); // the compile itself takes seconds
  });
});

describe('negative control: keep-trapped-grammar (with skip-schema-limits)', () => {
  const s = serverWith(['skip-schema-limits', 'keep-trapped-grammar']);

  it("after the schema that traps xgrammar, another key's structured request fails too", async () => {
    await expect(structured(s.get(), 'sk-alice', nested(200))).rejects.toMatchObject({ status: 400 });
    await expect(structured(s.get(), 'sk-bob', SIMPLE)).rejects.toMatchObject({ status: 400 });
  });
});
