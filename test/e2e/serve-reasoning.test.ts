// Reasoning through a real `tessera serve` on gen-model's qwen3-tiny GGUF (Qwen3's real tokenizer
// and chat template, random weights), driven by the official openai client. A random model never
// writes `<think>` or `</think>` by itself, so the server runs `--reasoning-parser deepseek_r1`:
// every answer starts inside the block, and with no `</think>` all of it is reasoning (the
// `</think>` split itself, across chunk boundaries, is reasoning.test.ts's). What this shows with
// real tokens: the reasoning is exactly the model's greedy text (the same prompt through
// /v1/completions), streamed as `delta.reasoning_content` with no content deltas, the same in the
// Responses API as a `reasoning` item (whole and streamed), and `enable_thinking: false` reaching
// Qwen3's template (its prompt closes an empty block: more prompt tokens, counted here).
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
let id: string;

beforeAll(async () => {
  const path = join(home.dir, 'qwen3-tiny.gguf');
  await genModel({ preset: 'qwen3-tiny', format: 'gguf', out: path, seed: 1 });
  model = await loadModel(path);
  server = await startServer(
    ['--model', path, '--context-length', '256', '--kv-pages', '64', '--reasoning-parser', 'deepseek_r1'],
    home.dir,
  );
  client = server.client();
  id = (await client.models.list()).data[0]!.id;
});
afterAll(async () => {
  await server?.stop();
});

const MESSAGES = [{ role: 'user', content: 'Name a colour.' }] as const;
const GREEDY = { max_tokens: 10, temperature: 0 } as const;

type WithReasoning = { reasoning_content?: string | null; content?: string | null };

describe('reasoning_content through the openai client (serve, qwen3 template, deepseek_r1 parser)', () => {
  it("an unclosed block is all reasoning: the model's own greedy text, content null; streamed as reasoning deltas", async () => {
    const rendered = model.chatTemplate.render(MESSAGES);
    const reference = await client.completions.create({ model: id, prompt: rendered, ...GREEDY });
    const expected = reference.choices[0]!.text;
    expect(expected.length).toBeGreaterThan(0);

    const whole = await client.chat.completions.create({ model: id, messages: [...MESSAGES], ...GREEDY });
    const message = whole.choices[0]!.message as (typeof whole.choices)[0]['message'] & WithReasoning;
    expect(message.reasoning_content).toBe(expected);
    expect(message.content).toBeNull();
    expect(whole.choices[0]!.finish_reason).toBe('length');

    let reasoning = '';
    let content = '';
    for await (const chunk of await client.chat.completions.create({
      model: id,
      messages: [...MESSAGES],
      ...GREEDY,
      stream: true,
    })) {
      const delta = chunk.choices[0]?.delta as WithReasoning | undefined;
      reasoning += delta?.reasoning_content ?? '';
      content += delta?.content ?? '';
    }
    expect(reasoning).toBe(expected);
    expect(content).toBe('');
  });

  it('enable_thinking: false (chat_template_kwargs) reaches the template: its prompt closes an empty block', async () => {
    const base = { model: id, messages: [...MESSAGES], max_tokens: 1, temperature: 0 };
    const on = await client.chat.completions.create(base);
    const off = await client.chat.completions.create({
      ...base,
      // vLLM's extension field, passed through the openai client's body as is.
      ...({ chat_template_kwargs: { enable_thinking: false } } as object),
    });
    const closed = model.chatTemplate.render(MESSAGES, { templateKwargs: { enable_thinking: false } });
    expect(closed.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    expect(off.usage?.prompt_tokens).toBe(model.tokenizer.encode(closed, { addSpecialTokens: false }).length);
    expect(off.usage!.prompt_tokens).toBeGreaterThan(on.usage!.prompt_tokens);
    await expect(
      client.chat.completions.create({ ...base, ...({ chat_template_kwargs: { enable_thinking: 'no' } } as object) }),
    ).rejects.toMatchObject({ status: 400 });
  });

  it('the Responses API answers a reasoning item, whole and streamed (response.reasoning_text.delta)', async () => {
    const rendered = model.chatTemplate.render(MESSAGES);
    const reference = await client.completions.create({ model: id, prompt: rendered, ...GREEDY });
    const expected = reference.choices[0]!.text;
    const body = { model: id, input: 'Name a colour.', max_output_tokens: GREEDY.max_tokens, temperature: 0 };

    const whole = await client.responses.create(body);
    const item = whole.output[0] as { type: string; content?: { type: string; text: string }[] };
    expect(item.type).toBe('reasoning');
    expect(item.content).toEqual([{ type: 'reasoning_text', text: expected }]);
    expect(whole.status).toBe('incomplete');

    const types: string[] = [];
    let deltas = '';
    let done: { output: { type: string }[] } | undefined;
    for await (const event of await client.responses.create({ ...body, stream: true })) {
      types.push(event.type);
      if (event.type === 'response.reasoning_text.delta') deltas += event.delta;
      if (event.type === 'response.incomplete') done = event.response;
    }
    expect(deltas).toBe(expected);
    expect(types).toContain('response.reasoning_text.done');
    expect(types.indexOf('response.output_item.added')).toBeLessThan(types.indexOf('response.reasoning_text.delta'));
    expect(done?.output.map((o) => o.type)).toEqual(['reasoning']);
  });
});
