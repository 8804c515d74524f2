// The small routes and headers agents and browsers expect, over a fake back end: /v1/models/{id},
// /tokenize, /detokenize, /version, x-request-id, opt-in CORS; and the Responses API's input
// forms reaching the back end as chat turns, with its 400s naming the field.
import { afterEach, describe, expect, it } from 'vitest';
import { send, TestServers } from '../testing/harness.js';

const servers = new TestServers();
afterEach(() => servers.closeAll());

describe('agent-facing routes', () => {
  it('serves one model by id, and 404s another', async () => {
    const t = await servers.start();
    expect((await send(t.url, 'GET', '/v1/models/fake-model')).json).toMatchObject({
      id: 'fake-model',
      object: 'model',
      max_model_len: 64,
    });
    const missing = await send(t.url, 'GET', '/v1/models/gpt-9');
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatchObject({ code: 'model_not_found', param: 'model' });
  });

  it('tokenizes a prompt or messages, detokenizes ids, and says its version', async () => {
    const t = await servers.start();
    const tok = await send(t.url, 'POST', '/tokenize', { prompt: 'Hi' });
    expect(tok.status).toBe(200);
    expect(tok.json).toMatchObject({ count: tok.json.tokens.length, max_model_len: 64, token_strs: null });
    expect(
      (await send(t.url, 'POST', '/tokenize', { messages: [{ role: 'user', content: 'Hi' }] })).json.count,
    ).toBeGreaterThan(0);
    const detok = await send(t.url, 'POST', '/detokenize', { tokens: tok.json.tokens });
    expect(detok.status).toBe(200);
    expect(typeof detok.json.prompt).toBe('string');
    expect((await send(t.url, 'POST', '/detokenize', { tokens: [1e9] })).json.error).toMatchObject({ param: 'tokens' });
    expect((await send(t.url, 'GET', '/version')).json).toEqual({ version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
  });

  it('echoes a sane x-request-id and makes one up otherwise', async () => {
    const t = await servers.start();
    expect(
      (await send(t.url, 'GET', '/v1/models', undefined, { 'x-request-id': 'abc-123' })).headers.get('x-request-id'),
    ).toBe('abc-123');
    expect(
      (
        await send(t.url, 'GET', '/v1/models', undefined, { 'x-request-id': 'bad id with spaces and /slashes/' })
      ).headers.get('x-request-id'),
    ).toMatch(/^req-/);
    expect((await send(t.url, 'GET', '/health')).headers.get('x-request-id')).toMatch(/^req-/);
  });

  it('sends CORS headers and answers preflights only when --cors-origin is set', async () => {
    const off = await servers.start();
    expect((await send(off.url, 'GET', '/v1/models')).headers.get('access-control-allow-origin')).toBeNull();
    expect((await send(off.url, 'OPTIONS', '/v1/chat/completions')).status).toBe(405);
    const on = await servers.start({ corsOrigin: 'https://app.example' });
    const pre = await send(on.url, 'OPTIONS', '/v1/chat/completions', undefined, {
      'access-control-request-headers': 'authorization, content-type',
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(pre.headers.get('access-control-allow-headers')).toBe('authorization, content-type');
    expect((await send(on.url, 'GET', '/v1/models')).headers.get('access-control-allow-origin')).toBe(
      'https://app.example',
    );
  });

  it('takes Responses input as text or items and passes it on as chat turns', async () => {
    const t = await servers.start({ contextLength: 512 });
    const r = await send(t.url, 'POST', '/v1/responses', {
      instructions: 'Be brief.',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'Weather?' }] },
        { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{"city":"Bath"}' },
        { type: 'function_call_output', call_id: 'c1', output: 'grey' },
      ],
      max_output_tokens: 3,
      store: true,
    });
    expect(r.json.error).toBeNull();
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      object: 'response',
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      usage: { output_tokens: 3 },
    });
    expect(r.json.output[0]).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'Hello world,' }],
    });
    expect(t.backend.lastCall.request.sampling.maxTokens).toBe(3);
    const bad = [
      [{ input: [] }, 'input'],
      [{ input: 'x', n: 2 }, 'n'],
      [{ input: 'x', previous_response_id: 'resp_1' }, 'previous_response_id'],
      [{ input: [{ type: 'reasoning' }] }, 'input[0].type'],
      [{ input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type'],
      [{ input: 'x', tools: [{ type: 'function', name: 'a b' }] }, 'tools[0].name'],
    ] as const;
    for (const [body, param] of bad)
      expect((await send(t.url, 'POST', '/v1/responses', body)).json.error, param).toMatchObject({ param });
  });
});
