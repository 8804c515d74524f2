// The Batch API through `tessera up --batch-dir` and two API keys, with the official openai
// client: the router keeps the uploads, batches and answers on its own disk and runs each line
// as a request of its tenant through its own path (prefill, then decode); a line's answer equals
// the same request sent interactively (--deterministic, temperature 0); the other tenant gets 404
// for every id and empty lists. The crash test and the per-line errors are serve-batch.test.ts's
// (the same store and runner, src/batch and src/api/openai/batch-runner.ts).
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeJson } from '../support/process.js';
import { spawnTessera, useTestHome, type Proc } from './support.js';

const MODEL = 'builtin:tiny';
const KEYS = { 'sk-alice': 'alice', 'sk-bob': 'bob' };

const home = useTestHome();
let cluster: Proc;
let alice: OpenAI;
let bob: OpenAI;

beforeAll(async () => {
  const keys = await writeJson(home.dir, 'keys.json', KEYS);
  cluster = spawnTessera(
    'up',
    ['up', '--port', '0', '--model', MODEL, '--deterministic', '--context-length', '256', '--api-keys', keys].concat([
      '--batch-dir',
      join(home.dir, 'batches'),
    ]),
    home.dir,
  );
  const url = (await cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/))[1] as string;
  const client = (apiKey: string): OpenAI =>
    new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
  [alice, bob] = [client('sk-alice'), client('sk-bob')];
});
afterAll(async () => {
  await cluster?.stop();
});

const body = (i: number) => ({
  model: MODEL,
  messages: [{ role: 'user' as const, content: `Say ${i}.` }],
  max_tokens: 4,
  temperature: 0,
});

describe('the Batch API on tessera up (the router runs the lines)', () => {
  it('answers each line as the same request sent interactively, and hides it all from the other tenant', async () => {
    const lines = [0, 1, 2].map((i) =>
      JSON.stringify({ custom_id: `req-${i}`, method: 'POST', url: '/v1/chat/completions', body: body(i) }),
    );
    const file = await alice.files.create({
      file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'in.jsonl'),
      purpose: 'batch',
    });
    const created = await alice.batches.create({
      input_file_id: file.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    const until = Date.now() + 20_000;
    let done = created;
    while (done.status !== 'completed') {
      expect(Date.now(), `batch still ${done.status}`).toBeLessThan(until);
      await new Promise((r) => setTimeout(r, 50));
      done = await alice.batches.retrieve(created.id);
    }
    expect(done.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });
    const output = (await (await alice.files.content(done.output_file_id!)).text()).trim().split('\n');
    const answers = new Map(
      output.map((l) => {
        const r = JSON.parse(l) as {
          custom_id: string;
          response: { status_code: number; body: OpenAI.Chat.ChatCompletion };
        };
        expect(r.response.status_code).toBe(200);
        return [r.custom_id, r.response.body.choices[0]?.message.content] as const;
      }),
    );
    for (const i of [0, 1, 2]) {
      const direct = await alice.chat.completions.create(body(i));
      expect(answers.get(`req-${i}`)).toBe(direct.choices[0]?.message.content);
    }

    await expect(bob.files.retrieve(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(bob.files.content(done.output_file_id!)).rejects.toMatchObject({ status: 404 });
    await expect(bob.batches.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(bob.batches.cancel(created.id)).rejects.toMatchObject({ status: 404 });
    expect((await bob.batches.list()).data).toEqual([]);
    expect((await bob.files.list()).data).toEqual([]);
    expect((await alice.batches.list()).data.map((b) => b.id)).toContain(created.id);
  });
});
