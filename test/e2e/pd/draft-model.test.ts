// Speculative decoding with a draft model on the decode worker of `tessera up`: builtin:austen
// drafted for by its own first two layers (bench/lib/first-layers.ts). The decode rebuilds the
// draft's KV from the output it generates (it never sees the prompt's ids), so PD stays
// transparent: greedy and seeded answers equal a co-located `serve` without speculation, the
// decode worker's /health shows the draft model's drafts, and a draft of another vocabulary is
// refused before any child starts (exit 2).
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFirstLayers } from '../../../bench/lib/first-layers.js';
import { ROOT, runCli, startServer, type Server } from '../support/process.js';
import { spawnTessera, testHome, type Proc } from './support.js';

const MODEL = 'builtin:austen';
const PROMPTS = ['It is a truth universally acknowledged', 'Mr. Darcy said'];

let home: Awaited<ReturnType<typeof testHome>>;
let cluster: Proc;
let plain: Server;
let routerUrl: string;

beforeAll(async () => {
  home = await testHome();
  const draft = await writeFirstLayers(join(ROOT, 'models', 'austen'), join(home.dir, 'austen-2'), 2);
  cluster = spawnTessera('up', ['up', '--port', '0', '--model', MODEL, '--draft-model', draft], home.dir);
  [plain, routerUrl] = await Promise.all([
    startServer(['--model', MODEL, '--spec-max-draft', '0'], home.dir),
    cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/).then((m) => m[1] as string),
  ]);
});
afterAll(async () => {
  await Promise.all([cluster?.stop(), plain?.stop()]);
  await home?.remove();
});

describe('a draft model on the decode workers of tessera up', () => {
  it('answers as a co-located serve without speculation, greedy and seeded; the decode drafted', async () => {
    const pd = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
    for (const extra of [{ temperature: 0 }, { temperature: 0.8, seed: 5 }]) {
      const texts = (client: OpenAI) =>
        Promise.all(
          PROMPTS.map(async (prompt) => {
            const r = (await client.completions.create({
              model: MODEL,
              prompt,
              max_tokens: 32,
              ...extra,
            } as never)) as OpenAI.Completion;
            return r.choices[0]?.text;
          }),
        );
      expect(await texts(pd)).toEqual(await texts(plain.client()));
    }
    const decode = /\[decode-1\] tessera: listening on (http:\/\/[\d.]+:\d+)/.exec(
      cluster.stdout() + cluster.stderr(),
    )?.[1];
    const health = (await (await fetch(`${decode}/health`)).json()) as {
      speculation: { drafter: string; draftTokens: number };
    };
    expect(health.speculation.drafter).toBe('model');
    expect(health.speculation.draftTokens).toBeGreaterThan(0);
  });

  it('refuses a draft model of another vocabulary before any child starts', async () => {
    const run = await runCli(['up', '--model', MODEL, '--draft-model', 'builtin:tiny', '--port', '0'], home.dir);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/their vocabularies differ/);
    expect(run.stderr).not.toMatch(/\[decode-1\]/);
  });
});
