// A real `tessera serve` process on gen-model's gpt-oss-tiny GGUF with MXFP4 experts (o200k and
// harmony, random weights) driven by the official openai client: the start-up line says what was
// repacked, a chat request is rendered in harmony (the system message as a developer
// "# Instructions" message, <|start|>assistant to answer), its prompt tokens counted as that text's
// tokens here, and the greedy answer's ids are the in-process engine's for the same prompt.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine } from '../../src/engine/index.js';
import { genModel } from '../../src/gen/index.js';
import { loadModel, type LoadedModel } from '../../src/model/index.js';
import { tesseraTrace } from '../llama-cpp/drivers.js';
import { startServer, useTestHome, type Server } from './support/process.js';

const home = useTestHome();
let server: Server;
let client: OpenAI;
let model: LoadedModel;

beforeAll(async () => {
  const path = join(home.dir, 'gpt-oss-tiny-mxfp4.gguf');
  await genModel({ preset: 'gpt-oss-tiny', format: 'gguf', out: path, seed: 1, dtype: 'mxfp4' });
  [model, server] = await Promise.all([
    loadModel(path),
    startServer(
      ['--model', path, '--context-length', '256', '--kv-pages', '64', '--reasoning-parser', 'none'],
      home.dir,
      {},
      150_000,
    ),
  ]);
  client = server.client();
});
afterAll(async () => {
  await server?.stop();
});

const MESSAGES = [
  { role: 'system', content: 'You are brief.' },
  { role: 'user', content: 'Name a colour.' },
] as const;
const RENDERED =
  '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n' +
  'Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n' +
  '# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>' +
  '<|start|>developer<|message|># Instructions\n\nYou are brief.<|end|>' +
  '<|start|>user<|message|>Name a colour.<|end|><|start|>assistant';

describe('tessera serve with gpt-oss (MXFP4 experts, o200k, harmony), through the openai client', () => {
  it('says at start-up how much MXFP4 it repacked', () => {
    expect(server.stderr()).toMatch(/MXFP4: 12 tensors \(1\.6 MiB\) repacked exactly at load to q8_0: 3\.2 MiB/);
  });

  it("renders chat in harmony and answers with the engine's greedy ids", async () => {
    expect(model.chatTemplate.render(MESSAGES)).toBe(RENDERED);
    const prompt = model.tokenizer.encode(RENDERED, { addSpecialTokens: false });
    expect(prompt.slice(0, 3)).toEqual([200006, 17360, 200008]); // <|start|> system <|message|>
    const r = await client.chat.completions.create({
      model: (await client.models.list()).data[0]!.id,
      messages: [...MESSAGES],
      max_tokens: 8,
      temperature: 0,
    });
    expect(r.usage?.prompt_tokens).toBe(prompt.length);
    expect(r.choices[0]?.message.role).toBe('assistant');
    const engine = await createEngine(model, { kvPages: 8, threads: 1 });
    try {
      const expected = (await tesseraTrace(engine, prompt, 8)).ids;
      const stop = expected.findIndex((id) => model.config.eosTokenIds.includes(id));
      const answer = stop < 0 ? expected : expected.slice(0, stop);
      expect(r.choices[0]?.message.content).toBe(model.tokenizer.decode(answer));
      expect(r.usage?.completion_tokens).toBe(stop < 0 ? 8 : stop + 1);
    } finally {
      await engine.dispose();
    }
  });
});
