// Speculative decoding (prompt lookup) through a real `tessera serve` process and the official
// openai client, on the shipped Austen model (a trained model that quotes back what it read):
// with speculation on (the default) and off (--spec-max-draft 0) every answer is the same, greedy
// and seeded; the drafts show in the usage (OpenAI's predicted-output fields), /health and /metrics.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, testHome, type Server } from './support/process.js';

const MODEL = 'builtin:austen';
const TEXT =
  'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. ' +
  'However little known the feelings or views of such a man may be on his first entering a neighbourhood, this truth is so ' +
  'well fixed in the minds of the surrounding families.';
const PROMPTS = [`${TEXT}\n\nIt is a truth universally`, `${TEXT}\n\nHowever little known`, 'Mr. Darcy said'];

let home: Awaited<ReturnType<typeof testHome>>;
let on: Server;
let off: Server;

beforeAll(async () => {
  home = await testHome();
  [on, off] = await Promise.all([
    startServer(['--model', MODEL, '--kv-pages', '96'], home.dir),
    startServer(['--model', MODEL, '--kv-pages', '96', '--spec-max-draft', '0'], home.dir),
  ]);
});
afterAll(async () => {
  await Promise.all([on?.stop(), off?.stop()]);
  await home?.remove();
});

const complete = (server: Server, prompt: string, extra: object) =>
  server
    .client()
    .completions.create({ model: MODEL, prompt, max_tokens: 32, ...extra } as never) as Promise<OpenAI.Completion>;

describe('speculative decoding under tessera serve', () => {
  it('answers every prompt as without speculation, greedy and seeded, several at once', async () => {
    for (const extra of [{ temperature: 0 }, { temperature: 0.8, seed: 11 }]) {
      const [withSpec, without] = await Promise.all([
        Promise.all(PROMPTS.map((p) => complete(on, p, extra))),
        Promise.all(PROMPTS.map((p) => complete(off, p, extra))),
      ]);
      expect(withSpec.map((r) => r.choices[0]?.text)).toEqual(without.map((r) => r.choices[0]?.text));
      expect(without.some((r) => r.usage?.completion_tokens_details !== undefined)).toBe(false);
    }
  });

  it('reports the drafts per request (usage) and in aggregate (/health, /metrics)', async () => {
    const r = await complete(on, PROMPTS[0]!, { temperature: 0 });
    const details = r.usage?.completion_tokens_details;
    expect(details?.accepted_prediction_tokens).toBeGreaterThan(0);
    // /health spreads the node's detail at its top level.
    const health = (await (await fetch(`${on.url}/health`)).json()) as { speculation: Record<string, number> };
    expect(health.speculation.acceptedTokens).toBeGreaterThan(0);
    expect(health.speculation.acceptanceRate).toBeGreaterThan(0);
    expect(health.speculation.rolledBackPositions).toBe(
      health.speculation.draftTokens! - health.speculation.acceptedTokens!,
    );
    const metrics = await (await fetch(`${on.url}/metrics`)).text();
    expect(metrics).toMatch(/^tessera_spec_accepted_tokens_total [1-9]/m);
  });
});
