// A real `tessera serve` process (builtin:tiny) driven by the official openai client:
// completions and chat, streamed and not, usage and include_usage, stop strings, seeds, the
// model list, and errors as the SDK parses them.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvPages, promptIds, startServer, useTestHome, waitUntil, type Server } from './support/process.js';

const home = useTestHome();
let server: Server;
let client: OpenAI;

beforeAll(async () => {
  server = await startServer(['--context-length', '256', '--kv-pages', '64'], home.dir);
  client = server.client();
});
afterAll(async () => {
  await server?.stop();
});

const MODEL = 'builtin:tiny';

describe('tessera serve through the openai client', () => {
  it('lists the served model with its root and context length', async () => {
    const list = await client.models.list();
    expect(list.data).toHaveLength(1);
    expect(list.data[0]).toMatchObject({
      id: MODEL,
      object: 'model',
      owned_by: 'tessera',
      root: MODEL,
      max_model_len: 256,
    });
  });

  it('completes a text prompt with exactly max_tokens tokens and usage', async () => {
    const r = await client.completions.create({
      model: MODEL,
      prompt: 'Once upon a time',
      max_tokens: 12,
      temperature: 0,
      ignore_eos: true,
    } as never);
    expect(r.object).toBe('text_completion');
    expect(r.choices[0]?.finish_reason).toBe('length');
    expect(r.choices[0]?.text.length).toBeGreaterThan(0);
    expect(r.usage?.completion_tokens).toBe(12);
    expect(r.usage?.total_tokens).toBe((r.usage?.prompt_tokens ?? 0) + 12);
  });

  it('streams the same greedy text as the non-streamed answer, then usage with include_usage', async () => {
    const body = { model: MODEL, prompt: promptIds(20), max_tokens: 16, temperature: 0, ignore_eos: true };
    const whole = await client.completions.create(body as never);
    const stream = await client.completions.create({
      ...body,
      stream: true,
      stream_options: { include_usage: true },
    } as never);
    let text = '';
    const finishes: (string | null)[] = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream as unknown as AsyncIterable<OpenAI.Completion>) {
      if (chunk.choices.length === 0) usage = chunk.usage;
      for (const choice of chunk.choices) {
        text += choice.text;
        finishes.push(choice.finish_reason ?? null);
      }
    }
    expect(text).toBe((whole as OpenAI.Completion).choices[0]?.text);
    expect(finishes.at(-1)).toBe('length');
    expect(usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 16, total_tokens: 36 });
  });

  it('gives the same sampled text for the same seed', async () => {
    const body = {
      model: MODEL,
      prompt: 'The sea',
      max_tokens: 10,
      temperature: 1,
      top_p: 0.9,
      seed: 1234,
      ignore_eos: true,
    };
    const a = await client.completions.create(body as never);
    const b = await client.completions.create(body as never);
    expect((a as OpenAI.Completion).choices[0]?.text).toBe((b as OpenAI.Completion).choices[0]?.text);
  });

  it('answers n sampled choices from one prompt: choice 0 is the n = 1 answer of that seed, usage counts them all', async () => {
    const body = { model: MODEL, prompt: 'The sea', max_tokens: 8, temperature: 1, seed: 99, ignore_eos: true };
    const one = (await client.completions.create(body as never)) as OpenAI.Completion;
    const three = (await client.completions.create({ ...body, n: 3 } as never)) as OpenAI.Completion;
    expect(three.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(three.choices[0]?.text).toBe(one.choices[0]?.text);
    expect(new Set(three.choices.map((c) => c.text)).size).toBe(3);
    expect(three.usage).toMatchObject({ prompt_tokens: one.usage?.prompt_tokens, completion_tokens: 24 });
  });

  it('answers several prompts in one request, each as it answers alone', async () => {
    const body = { model: MODEL, max_tokens: 6, temperature: 0, ignore_eos: true };
    const alone = await Promise.all(
      ['The sea', 'A ship'].map(
        async (prompt) =>
          ((await client.completions.create({ ...body, prompt } as never)) as OpenAI.Completion).choices[0]?.text,
      ),
    );
    const batch = (await client.completions.create({
      ...body,
      prompt: ['The sea', 'A ship'],
    } as never)) as OpenAI.Completion;
    expect(batch.choices.map((c) => c.text)).toEqual(alone);
  });

  it('answers chat, streamed and not, through the chat template', async () => {
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'Hello!' },
    ];
    const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0 });
    expect(r.object).toBe('chat.completion');
    expect(r.choices[0]?.message.role).toBe('assistant');
    expect(r.usage?.prompt_tokens).toBeGreaterThan(5);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 8,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let roles = 0;
    let last: OpenAI.ChatCompletionChunk | undefined;
    for await (const chunk of stream) {
      last = chunk;
      if (chunk.choices[0]?.delta.role === 'assistant') roles++;
      content += chunk.choices[0]?.delta.content ?? '';
    }
    expect(roles).toBe(1);
    expect(content).toBe(r.choices[0]?.message.content);
    // Same prompt and completion; the second request found the first one's full pages cached.
    expect(last?.usage).toMatchObject({
      prompt_tokens: r.usage?.prompt_tokens,
      completion_tokens: r.usage?.completion_tokens,
    });
    expect(r.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    expect(last?.usage?.prompt_tokens_details?.cached_tokens).toBe(
      16 * Math.floor(((r.usage?.prompt_tokens ?? 0) - 1) / 16),
    );
  });

  it('ends at a stop string, withholding it and all after it, with finish_reason stop', async () => {
    const body = { model: MODEL, prompt: promptIds(10, 3000), max_tokens: 24, temperature: 0, ignore_eos: true };
    const full = ((await client.completions.create(body as never)) as OpenAI.Completion).choices[0]?.text ?? '';
    // A stop string that starts inside the output: the first occurrence of a 3-character slice.
    const start = Math.floor(full.length / 2);
    const stop = full.slice(start, start + 3);
    const cut = full.indexOf(stop);
    expect(stop.length).toBe(3);
    for (const stream of [false, true]) {
      let text = '';
      let finish: string | null | undefined;
      if (stream) {
        for await (const chunk of (await client.completions.create({
          ...body,
          stop,
          stream: true,
        } as never)) as unknown as AsyncIterable<OpenAI.Completion>) {
          text += chunk.choices[0]?.text ?? '';
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
      } else {
        const r = (await client.completions.create({ ...body, stop } as never)) as OpenAI.Completion;
        text = r.choices[0]?.text ?? '';
        finish = r.choices[0]?.finish_reason;
      }
      expect(text).toBe(full.slice(0, cut));
      expect(finish).toBe('stop');
    }
  });

  it('reports errors the SDK parses: 400 with code and param, 404 for an unknown model', async () => {
    const tooLong = client.completions.create({ model: MODEL, prompt: promptIds(200), max_tokens: 57 });
    await expect(tooLong).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    await expect(tooLong).rejects.toMatchObject({
      status: 400,
      code: 'context_length_exceeded',
      param: 'max_tokens',
      type: 'invalid_request_error',
    });
    const unknown = client.completions.create({ model: 'gpt-4', prompt: 'x', max_tokens: 1 });
    await expect(unknown).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(unknown).rejects.toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
    const unsupported = client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1, suffix: 'end' } as never);
    await expect(unsupported).rejects.toMatchObject({ status: 400, param: 'suffix' });
  });

  it('returns every page once idle: allocated 0, free + cached = the pool', async () => {
    await waitUntil('idle', async () => (await kvPages(server.url)).allocated === 0);
    const pages = await kvPages(server.url);
    expect(pages.free + pages.cached).toBe(64);
    expect(pages.quarantined).toBe(0);
  });

  it('shuts down on SIGTERM after letting an in-flight stream finish: exit 0', async () => {
    const stream = (await client.completions.create({
      model: MODEL,
      prompt: promptIds(8, 4000),
      max_tokens: 48,
      temperature: 0,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    } as never)) as unknown as AsyncIterable<OpenAI.Completion>;
    let stopped: ReturnType<Server['stop']> | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      stopped ??= server.stop();
      usage = chunk.usage ?? usage;
    }
    expect(usage?.completion_tokens).toBe(48);
    const exited = await stopped;
    expect(exited?.code).toBe(0);
    expect(exited?.stderr).toMatch(/SIGTERM[\s\S]*shutting down[\s\S]*stopped/);
  });
});
