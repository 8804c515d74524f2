// A real `tessera serve` process on gen-model's gemma3-tiny Hugging Face directory (Gemma 3's real
// tokenizer and chat template, random weights) driven by the official openai client: a chat
// request is rendered with Gemma's own template (the system message folded into the first user
// turn, <start_of_turn>model to answer), its prompt tokens counted as that text's tokens here, the
// greedy answer's ids are the in-process engine's for the same prompt, and streamed and whole
// answers agree.
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
  const dir = join(home.dir, 'gemma3-tiny');
  await genModel({ preset: 'gemma3-tiny', format: 'hf', out: dir, seed: 1 });
  [model, server] = await Promise.all([
    loadModel(dir),
    startServer(['--model', dir, '--context-length', '256', '--kv-pages', '64'], home.dir, {}, 150_000),
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
const RENDERED = '<bos><start_of_turn>user\nYou are brief.\n\nName a colour.<end_of_turn>\n<start_of_turn>model\n';

describe('tessera serve with a Gemma 3 tokenizer and chat template, through the openai client', () => {
  it("renders chat with Gemma's template and answers with the engine's greedy ids", async () => {
    expect(model.chatTemplate.source).toBe('model');
    expect(model.chatTemplate.render(MESSAGES)).toBe(RENDERED);
    const prompt = model.tokenizer.encode(RENDERED, { addSpecialTokens: false });
    expect(prompt.slice(0, 4)).toEqual([2, 105, 2364, 107]); // <bos> <start_of_turn> user \n
    const r = await client.chat.completions.create({
      model: (await client.models.list()).data[0]!.id,
      messages: [...MESSAGES],
      max_tokens: 8,
      temperature: 0,
    });
    expect(r.usage?.prompt_tokens).toBe(prompt.length);
    expect(r.choices[0]?.message.role).toBe('assistant');
    expect(r.usage?.completion_tokens).toBe(8);
    const engine = await createEngine(model, { kvPages: 8, threads: 1 });
    try {
      const expected = (await tesseraTrace(engine, prompt, 8)).ids;
      expect(r.choices[0]?.message.content).toBe(model.tokenizer.decode(expected));
    } finally {
      await engine.dispose();
    }
  });

  it('streams the same greedy chat answer as the whole one', async () => {
    const id = (await client.models.list()).data[0]!.id;
    const body = { model: id, messages: [...MESSAGES], max_tokens: 12, temperature: 0 };
    const whole = await client.chat.completions.create(body);
    let text = '';
    let chunks = 0;
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      text += chunk.choices[0]?.delta.content ?? '';
      chunks++;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text).toBe(whole.choices[0]?.message.content);
    expect(text.length).toBeGreaterThan(0);
  });
});
