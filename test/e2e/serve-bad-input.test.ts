// Bad input keeps a real server serving: malformed JSON, wrong types, negative or huge
// max_tokens, empty prompts, invalid UTF-8, out-of-vocabulary ids, unknown model, oversize
// bodies, unknown routes. Each gets a 4xx in OpenAI's error shape, and a good request sent
// right after it succeeds.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvPages, startServer, useTestHome, type Server } from './support/process.js';

const home = useTestHome();
let server: Server;

beforeAll(async () => {
  server = await startServer(['--context-length', '128', '--kv-pages', '16'], home.dir);
});
afterAll(async () => {
  await server?.stop();
});

async function post(path: string, body: string | Uint8Array, method = 'POST'): Promise<{ status: number; json: any }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: method === 'GET' ? null : body,
  });
  const text = await response.text();
  return { status: response.status, json: text === '' ? undefined : JSON.parse(text) };
}

/**
 * An oversize POST: declared (content-length above the 32 MiB limit, headers only) or chunked
 * (more than 32 MiB written in 1 MiB pieces). Resolves with the answer, whenever it comes.
 */
function oversizePost(declared: boolean): Promise<{ status: number; body: string }> {
  const total = 33 * 1024 * 1024;
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    setTimeout(() => reject(new Error('no answer to an oversize body within 20 s')), 20_000).unref();
    const req = request(
      { hostname, port, method: 'POST', path: '/v1/completions', headers: declared ? { 'content-length': total } : {} },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', () => undefined); // EPIPE/ECONNRESET after the answer: expected
    if (declared) {
      // The declared length alone is refused: send the headers and wait for the answer.
      req.flushHeaders();
      return;
    }
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    let sent = 0;
    const pump = (): void => {
      while (sent < total && !req.destroyed) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      if (!req.destroyed) req.end();
    };
    pump();
  });
}

async function goodRequestSucceeds(): Promise<void> {
  const r = await post('/v1/completions', JSON.stringify({ prompt: 'hello', max_tokens: 3, temperature: 0 }));
  expect(r.status).toBe(200);
  expect(r.json.usage.completion_tokens).toBeGreaterThan(0);
}

const json = (value: unknown): string => JSON.stringify(value);
const CASES: readonly {
  name: string;
  path?: string;
  method?: string;
  body: string | Uint8Array;
  status: number;
  code: string;
  param?: string | null;
}[] = [
  { name: 'malformed JSON', body: '{"prompt": "x", ', status: 400, code: 'invalid_request' },
  { name: 'a JSON array body', body: '[1, 2]', status: 400, code: 'invalid_request' },
  {
    name: 'max_tokens of the wrong type',
    body: json({ prompt: 'x', max_tokens: 'ten' }),
    status: 400,
    code: 'invalid_request',
    param: 'max_tokens',
  },
  {
    name: 'a prompt of the wrong type',
    body: json({ prompt: 42, max_tokens: 1 }),
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  {
    name: 'temperature of the wrong type',
    body: json({ prompt: 'x', temperature: 'hot' }),
    status: 400,
    code: 'invalid_request',
    param: 'temperature',
  },
  {
    name: 'negative max_tokens',
    body: json({ prompt: 'x', max_tokens: -1 }),
    status: 400,
    code: 'invalid_request',
    param: 'max_tokens',
  },
  {
    name: 'zero max_tokens',
    body: json({ prompt: 'x', max_tokens: 0 }),
    status: 400,
    code: 'invalid_request',
    param: 'max_tokens',
  },
  {
    name: 'huge max_tokens',
    body: json({ prompt: 'x', max_tokens: 1e15 }),
    status: 400,
    code: 'context_length_exceeded',
    param: 'max_tokens',
  },
  {
    name: 'an empty text prompt',
    body: json({ prompt: '', max_tokens: 1 }),
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  {
    name: 'an empty token prompt',
    body: json({ prompt: [], max_tokens: 1 }),
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  {
    name: 'empty chat messages',
    path: '/v1/chat/completions',
    body: json({ messages: [], max_tokens: 1 }),
    status: 400,
    code: 'invalid_request',
    param: 'messages',
  },
  {
    name: 'an out-of-vocabulary token id',
    body: json({ prompt: [1, 99999999], max_tokens: 1 }),
    status: 400,
    code: 'invalid_request',
    param: 'prompt',
  },
  {
    name: 'invalid UTF-8',
    body: Uint8Array.from([...Buffer.from('{"prompt": "'), 0xff, 0xfe, ...Buffer.from('", "max_tokens": 1}')]),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'an unknown model',
    body: json({ model: 'gpt-4o', prompt: 'x', max_tokens: 1 }),
    status: 404,
    code: 'model_not_found',
    param: 'model',
  },
  {
    name: 'an unsupported parameter',
    body: json({ prompt: 'x', max_tokens: 1, suffix: 'end' }),
    status: 400,
    code: 'invalid_request',
    param: 'suffix',
  },
  { name: 'an unknown route', path: '/v1/engines', body: '{}', status: 404, code: 'route_not_found' },
  { name: 'a wrong method', path: '/v1/completions', method: 'GET', body: '', status: 405, code: 'method_not_allowed' },
];

describe('bad input', () => {
  for (const c of CASES) {
    it(`answers ${c.name} with ${c.status} in the OpenAI error shape, and keeps serving`, async () => {
      const r = await post(c.path ?? '/v1/completions', c.body, c.method);
      expect(r.status).toBe(c.status);
      expect(Object.keys(r.json.error).sort()).toEqual(['code', 'message', 'param', 'type']);
      expect(r.json.error.code).toBe(c.code);
      expect(typeof r.json.error.message).toBe('string');
      if (c.param !== undefined) expect(r.json.error.param).toBe(c.param);
      await goodRequestSucceeds();
    });
  }

  // node:http, not fetch: the server answers 413 as soon as it knows, with Connection: close,
  // and a client still writing the body may see EPIPE before it reads that answer.
  for (const declared of [true, false]) {
    it(`answers an oversize body (${declared ? 'declared by content-length' : 'chunked, undeclared'}) with 413, and keeps serving`, async () => {
      const { status, body } = await oversizePost(declared);
      expect(status).toBe(413);
      expect(JSON.parse(body).error).toMatchObject({ code: 'body_too_large', type: 'invalid_request_error' });
      await goodRequestSucceeds();
    });
  }

  it('allocated no page for any of them', async () => {
    expect((await kvPages(server.url)).allocated).toBe(0);
  });
});
