// Bounded work per request, over a fake back end (context 64): malformed paths are 400s in
// OpenAI's shape, /tokenize refuses what the prompt bound refuses, /detokenize takes at most the
// context length in ids, and chats and Responses inputs have a bounded number of turns, read in
// one pass. Under the fault points that turn a bound off, the matching test fails.
import { afterEach, describe, expect, it } from 'vitest';
import { FaultSet } from '../../core/index.js';
import { send, TestServers } from '../testing/harness.js';
import { MAX_INPUT_ITEMS } from '../openai/responses-input.js';
import { MAX_MESSAGES } from '../openai/validate-chat.js';

const servers = new TestServers();
afterEach(() => servers.closeAll());

describe('malformed paths', () => {
  it.each(['/v1/models/%', '/v1/models/%zz', '/v1/models/%E0%A4%A', '/v1/models/%ED%A0%80'])(
    'answers GET %s with a 400 in the OpenAI error shape, never a 500',
    async (path) => {
      const t = await servers.start();
      const reply = await send(t.url, 'GET', path);
      expect(reply.status).toBe(400);
      expect(reply.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request' });
      expect(reply.text).not.toMatch(/URIError|at .*\.js/);
    },
  );

  it('still serves a well-encoded model id', async () => {
    const t = await servers.start();
    expect((await send(t.url, 'GET', '/v1/models/fake%2Dmodel')).status).toBe(200);
  });
});

describe('/tokenize and /detokenize bounds', () => {
  it('refuses a prompt longer than the prompt bound untokenized, as generation does', async () => {
    const t = await servers.start();
    const reply = await send(t.url, 'POST', '/tokenize', { prompt: 'x'.repeat(64 * 1024) });
    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject({ code: 'context_length_exceeded', param: 'prompt' });
  });

  it('refuses messages longer than the prompt bound, roles and tool calls counted', async () => {
    const t = await servers.start();
    const calls = Array.from({ length: 200 }, (_, i) => ({
      id: `call_${i}`,
      type: 'function',
      function: { name: 'f', arguments: '{"a":"' + 'y'.repeat(100) + '"}' },
    }));
    const reply = await send(t.url, 'POST', '/tokenize', {
      messages: [{ role: 'assistant', content: '', tool_calls: calls }],
    });
    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject({ code: 'context_length_exceeded', param: 'messages' });
  });

  it('fails the prompt test when skip-prompt-bound is on (negative control)', async () => {
    const t = await servers.start({ faults: new FaultSet(['skip-prompt-bound']) });
    const reply = await send(t.url, 'POST', '/tokenize', { prompt: 'x'.repeat(64 * 1024) });
    expect(reply.status).toBe(200);
  });

  it('takes at most the context length in ids, and says so', async () => {
    const t = await servers.start();
    expect((await send(t.url, 'POST', '/detokenize', { tokens: Array(64).fill(70) })).status).toBe(200);
    const reply = await send(t.url, 'POST', '/detokenize', { tokens: Array(65).fill(70) });
    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject({ param: 'tokens' });
    expect(reply.json.error.message).toContain('at most 64');
  });
});

describe('/detokenize under skip-request-limits (negative control)', () => {
  it('takes more ids than the context', async () => {
    const t = await servers.start({ faults: new FaultSet(['skip-request-limits']) });
    expect((await send(t.url, 'POST', '/detokenize', { tokens: Array(65).fill(70) })).status).toBe(200);
  });
});

describe('turn counts', () => {
  it('refuses a chat of more than MAX_MESSAGES messages, naming the limit', async () => {
    const t = await servers.start();
    const messages = Array.from({ length: MAX_MESSAGES + 1 }, () => ({ role: 'user', content: '' }));
    const reply = await send(t.url, 'POST', '/v1/chat/completions', { messages, max_tokens: 1 });
    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject({ param: 'messages' });
    expect(reply.json.error.message).toContain(`at most ${MAX_MESSAGES}`);
  });

  it('lets that chat through to later checks when skip-request-limits is on (negative control)', async () => {
    const t = await servers.start({ faults: new FaultSet(['skip-request-limits']) });
    const messages = Array.from({ length: MAX_MESSAGES + 1 }, () => ({ role: 'user', content: '' }));
    const reply = await send(t.url, 'POST', '/v1/chat/completions', { messages, max_tokens: 1 });
    expect(reply.json.error?.message ?? '').not.toContain(`at most ${MAX_MESSAGES}`);
  });

  it('refuses a Responses input of more than MAX_INPUT_ITEMS items, naming the limit', async () => {
    const t = await servers.start();
    const input = Array.from({ length: MAX_INPUT_ITEMS + 1 }, (_, i) => ({
      type: 'function_call',
      call_id: `c${i}`,
      name: 'f',
      arguments: '{}',
    }));
    const reply = await send(t.url, 'POST', '/v1/responses', { input });
    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject({ param: 'input' });
    expect(reply.json.error.message).toContain(`at most ${MAX_INPUT_ITEMS}`);
  });
});

describe('Responses input items', () => {
  it('merges consecutive function_call items into the assistant turn before them, in order, in one pass', async () => {
    const { readResponsesMessages } = await import('../openai/responses-input.js');
    const call = (i: number) => ({ type: 'function_call', call_id: `c${i}`, name: 'f', arguments: `{"i":${i}}` });
    const turns = readResponsesMessages({
      input: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: 'calling' },
        ...Array.from({ length: MAX_INPUT_ITEMS - 3 }, (_, i) => call(i)),
        { type: 'function_call_output', call_id: 'c0', output: 'done' },
      ],
    });
    expect(turns.map((t) => t.role)).toEqual(['user', 'assistant', 'tool']);
    expect(turns[1]).toMatchObject({ content: 'calling' });
    expect(turns[1]?.toolCalls?.map((c) => c.id)).toEqual(
      Array.from({ length: MAX_INPUT_ITEMS - 3 }, (_, i) => `c${i}`),
    );
    expect(turns[1]).not.toHaveProperty('calls');
  });
});

describe('the inline rule', () => {
  it('counts every turn, not only content: 2,000 empty messages go to the tokenizer threads', async () => {
    const { offloadedTokenizer } = await import('../openai/prompt-tokenizer.js');
    const { fakeCodec } = await import('../testing/fake-backend.js');
    const offloaded: string[] = [];
    const threads = { tokenize: async (job: { kind: string }) => (offloaded.push(job.kind), [1]) };
    const tokenizer = offloadedTokenizer(threads, fakeCodec);
    const chat = (n: number) => ({
      kind: 'chat' as const,
      cacheScope: 't',
      messages: Array.from({ length: n }, () => ({ role: 'user' as const, content: '' })),
      addGenerationPrompt: true,
      addSpecialTokens: false,
    });
    await tokenizer.tokenize(chat(1));
    expect(offloaded).toEqual([]);
    await tokenizer.tokenize(chat(2_000));
    expect(offloaded).toEqual(['chat']);
  });
});

describe('the prompt bound on chat', () => {
  it('counts tool call arguments, not only content: a chat of huge arguments is refused untokenized', async () => {
    const t = await servers.start();
    const calls = Array.from({ length: 50 }, (_, i) => ({
      id: `call_${i}`,
      type: 'function',
      function: { name: 'f', arguments: `{"a":"${'y'.repeat(1000)}"}` },
    }));
    const reply = await send(t.url, 'POST', '/v1/chat/completions', {
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', tool_calls: calls },
      ],
      max_tokens: 1,
    });
    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject({ code: 'context_length_exceeded', param: 'messages' });
    expect(reply.json.error.message).toMatch(/bytes long/);
  });
});
