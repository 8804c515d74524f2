// A real `tessera serve` process on gen-model's qwen3-tiny GGUF (Qwen3's real tokenizer and chat
// template, random weights) driven by the official openai client: a chat request is rendered
// with Qwen3's own template (its token count is that of the ChatML-style text Qwen3 writes,
// counted with the same tokenizer here), and streamed and whole greedy answers agree.
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genModel } from '../../src/gen/index.js';
import { loadModel, type LoadedModel } from '../../src/model/index.js';
import { startServer, useTestHome, type Server } from './support/process.js';

const home = useTestHome();
let server: Server;
let client: OpenAI;
let model: LoadedModel;
let path: string;

beforeAll(async () => {
  path = join(home.dir, 'qwen3-tiny.gguf');
  await genModel({ preset: 'qwen3-tiny', format: 'gguf', out: path, seed: 1 });
  model = await loadModel(path);
  server = await startServer(['--model', path, '--context-length', '256', '--kv-pages', '64'], home.dir);
  client = server.client();
});
afterAll(async () => {
  await server?.stop();
});

const MESSAGES = [
  { role: 'system', content: 'You are brief.' },
  { role: 'user', content: 'Name a colour.' },
] as const;

describe('tessera serve with a Qwen3 tokenizer and chat template, through the openai client', () => {
  it("renders chat with Qwen3's template: the prompt is <|im_start|>system ... <|im_start|>assistant", async () => {
    const rendered = model.chatTemplate.render(MESSAGES);
    expect(model.chatTemplate.source).toBe('model');
    expect(rendered).toBe(
      '<|im_start|>system\nYou are brief.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n',
    );
    const r = await client.chat.completions.create({
      model: (await client.models.list()).data[0]!.id,
      messages: [...MESSAGES],
      max_tokens: 8,
      temperature: 0,
    });
    expect(r.usage?.prompt_tokens).toBe(model.tokenizer.encode(rendered, { addSpecialTokens: false }).length);
    expect(r.choices[0]?.message.role).toBe('assistant');
    expect(r.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('streams the same greedy chat answer as the whole one', async () => {
    const id = (await client.models.list()).data[0]!.id;
    const body = { model: id, messages: [...MESSAGES], max_tokens: 12, temperature: 0 };
    const whole = await client.chat.completions.create(body);
    let text = '';
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true }))
      text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe(whole.choices[0]?.message.content);
    expect(text.length).toBeGreaterThan(0);
  });
});
