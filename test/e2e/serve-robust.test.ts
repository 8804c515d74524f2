// Issue 17 against a real `tessera serve`: what a client alone cannot do to the service.
//   - framing Node's parser refuses (bad Content-Length, Content-Length with chunked, a bad header
//     line, oversized headers) gets an OpenAI-shaped 4xx body, not Node's empty 400/431;
//   - an idle connection is closed (TESSERA_HTTP_LIMITS idleMs here 1 s; 30 s by default), and
//     past the connection cap, every connection answering a request, a new client gets a 503
//     with a body, at once, instead of hanging (silent ones are closed to make room:
//     serve-connections.test.ts);
//   - a request past a wire limit (top_k >= 2^31) is a 400 naming the field;
//   - n = 16 choices and 12 concurrent requests raise no MaxListenersExceededWarning;
//   - a 4 MiB prompt is refused from its length alone, before tokenization (it froze the
//     server for minutes before: bench/robust.mjs), and a 24 MiB body gets a 413.
// Negative controls at the end: a second `serve` with skip-http-guard, skip-request-limits and
// skip-prompt-bound (armed through TESSERA_FAULT, as a deployment would be) fails the same checks.
import { connect, type Socket } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, useTestHome, type Server } from './support/process.js';

const home = useTestHome();
let server: Server;
const CAP = 40;

beforeAll(async () => {
  server = await startServer(['--context-length', '512'], home.dir, {
    TESSERA_HTTP_LIMITS: `idleMs=1000,maxConnections=${CAP}`,
  });
});
afterAll(async () => {
  await server?.stop();
});

const port = (of: Server = server): number => Number(new URL(of.url).port);

/** Until /health answers 200 (the server saw the closes), at most 10 s. */
async function waitUntilServed(): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await fetch(`${server.url}/health`)).status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('/health never answered 200');
}

/** Opens a raw connection, writes `bytes`, resolves with everything the server sent until it closed. */
function raw(bytes: string, timeoutMs = 10_000, to: Server = server): Promise<{ text: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect({ host: '127.0.0.1', port: port(to) });
    let text = '';
    const timer = setTimeout(
      () => (socket.destroy(), reject(new Error(`no close within ${timeoutMs} ms; got ${JSON.stringify(text)}`))),
      timeoutMs,
    );
    socket.on('data', (d) => (text += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => (clearTimeout(timer), resolve({ text, closedAfterMs: Date.now() - started })));
    if (bytes !== '') socket.write(bytes);
  });
}

function parseResponse(text: string): {
  status: number;
  body: { error?: { message: string; type: string; code: string; param: unknown } };
} {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  return { status, body: JSON.parse(body) as never };
}

describe('tessera serve under a hostile client', () => {
  it('answers framing errors with an OpenAI-shaped 4xx body', async () => {
    const cases: [string, string, number, string][] = [
      [
        'a bad Content-Length',
        'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
        400,
        'bad_framing',
      ],
      [
        'Content-Length and chunked',
        'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n',
        400,
        'bad_framing',
      ],
      ['a bad header line', 'GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', 400, 'bad_framing'],
      [
        'oversized headers',
        `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
        431,
        'headers_too_large',
      ],
    ];
    for (const [name, request, status, code] of cases) {
      const answer = parseResponse((await raw(request)).text);
      expect([name, answer.status]).toEqual([name, status]);
      expect(answer.body.error).toMatchObject({
        code,
        type: 'invalid_request_error',
        param: null,
        message: expect.any(String),
      });
    }
  });

  it('closes a connection that sends nothing, and refuses connections past a cap of busy ones with a 503 body', async () => {
    const silent = await raw('');
    expect(silent.text).toBe('');
    expect(silent.closedAfterMs).toBeLessThan(5_000); // idleMs 1 s (and Node's 1 s check interval)
    const idle: Socket[] = [];
    const opened = Array.from(
      { length: CAP },
      () => new Promise<void>((resolve) => idle.push(connect({ host: '127.0.0.1', port: port() }, resolve))),
    );
    await Promise.all(opened);
    // Each starts a request whose body never comes (busy, not idle): its "100 Continue" says the server took it.
    await Promise.all(
      idle.map((s) => {
        s.on('error', () => undefined);
        const taken = new Promise((resolve) => s.once('data', resolve));
        s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n');
        return taken;
      }),
    );
    const refused = parseResponse((await raw('GET /health HTTP/1.1\r\nHost: x\r\n\r\n')).text);
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: 'overloaded', type: 'overloaded_error' });
    // Once they go, everyone is served again.
    for (const s of idle) s.destroy();
    await waitUntilServed();
  });

  it('refuses a request past a wire limit with a 400 naming the field', async () => {
    const client = server.client();
    const ask = (extra: Record<string, unknown>) =>
      client.completions.create({ model: 'builtin:tiny', prompt: 'hello', max_tokens: 2, ...extra } as never);
    for (const [extra, param] of [
      [{ top_k: 2 ** 31 }, 'top_k'],
      [{ stop: ['x'.repeat(1025)] }, 'stop'],
      [{ stop_token_ids: new Array(1025).fill(1) }, 'stop_token_ids'],
    ] as const) {
      const error = await ask(extra).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
    }
  });

  it('refuses a prompt that cannot fit from its length alone, and a body past the derived limit with a 413', async () => {
    const client = server.client();
    const error = await client.completions
      .create({ model: 'builtin:tiny', prompt: 'the cat sat on the mat '.repeat(190_000), max_tokens: 1 })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('context_length_exceeded');
    expect((error as Error).message).toMatch(/your prompt is \d+ bytes long/);
    // The declared length alone is refused (the body need not be sent).
    const huge = parseResponse(
      (
        await raw(
          `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${24 << 20}\r\n\r\n{"prompt":"`,
        )
      ).text,
    );
    expect(huge.status).toBe(413);
    expect(huge.body.error?.code).toBe('body_too_large');
  });

  it('serves n = 16 choices and 12 concurrent requests without a MaxListenersExceededWarning', async () => {
    const client = server.client();
    const one = await client.completions.create({ model: 'builtin:tiny', prompt: 'pages', max_tokens: 4, n: 16 });
    expect(one.choices).toHaveLength(16);
    await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        client.completions.create({ model: 'builtin:tiny', prompt: `p${i}`, max_tokens: 4 }),
      ),
    );
    expect(server.stderr()).not.toMatch(/MaxListenersExceededWarning/);
  });
});

describe('negative controls: `serve` with skip-http-guard, skip-request-limits and skip-prompt-bound', () => {
  let faulty: Server;
  beforeAll(async () => {
    faulty = await startServer(['--context-length', '512'], home.dir, {
      TESSERA_HTTP_LIMITS: `idleMs=1000,maxConnections=${CAP}`,
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'skip-http-guard,skip-request-limits,skip-prompt-bound',
    });
  });
  afterAll(async () => {
    await faulty?.stop();
  });
  const badLength = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n';
  /** How a 200 KB prompt (past the byte bound of context 512) is refused: from its length, or after tokenizing it. */
  const overlong = async (to: Server): Promise<string> => {
    const error = await to
      .client()
      .completions.create({ model: 'builtin:tiny', prompt: 'a '.repeat(100_000), max_tokens: 1 })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    return /your prompt is \d+ bytes long/.test(String((error as Error | undefined)?.message))
      ? 'from its length'
      : 'after tokenizing';
  };

  it("a framing error gets Node's empty 400, not an OpenAI body", async () => {
    expect(parseResponse((await raw(badLength)).text).body.error?.code).toBe('bad_framing');
    const { text } = await raw(badLength, 10_000, faulty);
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(() => parseResponse(text)).toThrow(); // no JSON body
  });

  it('a request past a wire limit is accepted (top_k = 2^31)', async () => {
    const r = await faulty
      .client()
      .completions.create({ model: 'builtin:tiny', prompt: 'hello', max_tokens: 2, top_k: 2 ** 31 } as never);
    expect(r.choices).toHaveLength(1);
  });

  it('a prompt past the byte bound is tokenized before it is refused', async () => {
    expect(await overlong(server)).toBe('from its length');
    expect(await overlong(faulty)).toBe('after tokenizing');
  });
});
