// Speculative decoding with a draft model through a real `tessera serve` process and the official
// openai client: builtin:austen (trained) drafted for by its own first two layers (a
// self-speculative draft written by bench/lib/first-layers.ts), its own KV pool, integrity checked
// after every step in both pools. With the draft model and without speculation
// (--spec-max-draft 0) every answer is the same, greedy and seeded, three at once; a json_schema
// request (never drafted: one token per step under its grammar) validates; the drafts show in
// /health (drafter "model", its pool, passes, cost ratio); a draft of another vocabulary is refused
// at start (exit 2). With --draft-vocab (the draft's head cut to the first ids: FR-Spec) the
// answers are the same too, and it drafts.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFirstLayers } from '../../bench/lib/first-layers.js';
import { ROOT, runCli, startServer, testHome, type Server } from './support/process.js';

const MODEL = 'builtin:austen';
const PROMPTS = ['It is a truth universally acknowledged', 'Mr. Darcy said', 'Elizabeth was'];

let home: Awaited<ReturnType<typeof testHome>>;
let draft: Server;
let off: Server;
let cut: Server;

beforeAll(async () => {
  home = await testHome();
  const draftDir = await writeFirstLayers(join(ROOT, 'models', 'austen'), join(home.dir, 'austen-2'), 2);
  [draft, off, cut] = await Promise.all([
    startServer(['--model', MODEL, '--kv-pages', '96', '--draft-model', draftDir], home.dir, {
      TESSERA_CHECK_EVERY_STEP: '1',
    }),
    startServer(['--model', MODEL, '--kv-pages', '96', '--spec-max-draft', '0'], home.dir),
    startServer(['--model', MODEL, '--kv-pages', '96', '--draft-model', draftDir, '--draft-vocab', '200'], home.dir, {
      TESSERA_CHECK_EVERY_STEP: '1',
    }),
  ]);
});
afterAll(async () => {
  await Promise.all([draft?.stop(), off?.stop(), cut?.stop()]);
  await home?.remove();
});

const complete = (server: Server, prompt: string, extra: object) =>
  server
    .client()
    .completions.create({ model: MODEL, prompt, max_tokens: 32, ...extra } as never) as Promise<OpenAI.Completion>;

describe('speculative decoding with a draft model under tessera serve', () => {
  it('answers every prompt as without speculation, greedy and seeded, several at once', async () => {
    for (const extra of [{ temperature: 0 }, { temperature: 0.8, seed: 7 }]) {
      const [withDraft, without, withCut] = await Promise.all([
        Promise.all(PROMPTS.map((p) => complete(draft, p, extra))),
        Promise.all(PROMPTS.map((p) => complete(off, p, extra))),
        Promise.all(PROMPTS.map((p) => complete(cut, p, extra))),
      ]);
      expect(withDraft.map((r) => r.choices[0]?.text)).toEqual(without.map((r) => r.choices[0]?.text));
      expect(withCut.map((r) => r.choices[0]?.text)).toEqual(without.map((r) => r.choices[0]?.text));
    }
    const health = (await (await fetch(`${cut.url}/health`)).json()) as {
      speculation: { draftTokens: number; draftModel: { headTokens: number | null } };
    };
    expect(health.speculation.draftTokens).toBeGreaterThan(0);
    expect(health.speculation.draftModel.headTokens).toBe(200);
  });

  it('reports the drafts per request (usage) and the draft model in /health', async () => {
    // The first answers drafted (before the node measured what a draft costs); later ones may
    // find the draft model paused: on a model this small a draft costs ~0.9 of a target step.
    const r = await complete(draft, PROMPTS[0]!, { temperature: 0 });
    const details = r.usage?.completion_tokens_details;
    if (details !== undefined) expect(details.accepted_prediction_tokens).toBeGreaterThanOrEqual(0);
    const health = (await (await fetch(`${draft.url}/health`)).json()) as {
      speculation: {
        drafter: string;
        draftTokens: number;
        acceptedTokens: number;
        rolledBackPositions: number;
        draftModel: { numPages: number; numPasses: number; costRatio: number };
      };
    };
    const s = health.speculation;
    expect(s.drafter).toBe('model');
    expect(s.draftTokens).toBeGreaterThan(0);
    expect(s.rolledBackPositions).toBe(s.draftTokens - s.acceptedTokens);
    expect(s.draftModel.numPages).toBe(96);
    expect(s.draftModel.numPasses).toBeGreaterThan(0);
    expect(s.draftModel.costRatio).toBeGreaterThan(0);
  });

  it('keeps a json_schema answer to its schema with the draft model on', async () => {
    const schema = {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } },
      required: ['name', 'age'],
      additionalProperties: false,
    };
    const r = await draft.client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Describe Mr. Bingley.' }],
      max_tokens: 64,
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    const parsed = JSON.parse(r.choices[0]!.message.content!) as Record<string, unknown>;
    expect(Object.keys(parsed).sort()).toEqual(['age', 'name']);
    expect(Number.isInteger(parsed['age'])).toBe(true);
  });

  it('refuses a draft model of another vocabulary at start, exit 2, naming the difference', async () => {
    const run = await runCli(['serve', '--model', MODEL, '--draft-model', 'builtin:tiny', '--port', '0'], home.dir);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /--draft-model builtin:tiny cannot draft for --model builtin:austen: their vocabularies differ/,
    );
  });
});
