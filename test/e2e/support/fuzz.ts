// A fuzz of random HTTP requests against a Tessera front end (serve or a router): fast-check
// draws bodies near every rule (types, ranges, wire limits, n, stop strings, batches, streams),
// garbage bytes and broken framing; every answer must be OpenAI-shaped and none a 5xx.
import { connect } from 'node:net';
import fc from 'fast-check';

export interface FuzzReport {
  readonly sent: number;
  readonly byStatus: Record<string, number>;
  /** Answers that broke the rules: a 5xx, a body outside OpenAI's shape, a dropped connection. */
  readonly bad: string[];
}

const num = fc.oneof(
  fc.integer({ min: -3, max: 8 }),
  fc.constantFrom(0, 1, 2 ** 31, 2 ** 53, -1, 1e300, 0.5),
  fc.double({ noNaN: true }),
);
const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom('', 'hello', '\u0000', '\ud800', 'x'.repeat(1030), '😀'.repeat(3)),
);
const anyValue = fc.oneof(
  num,
  text,
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer({ min: -1, max: 40_000 }), { maxLength: 6 }),
  fc.constant({}),
);
const small = fc.integer({ min: 1, max: 4 });

const common = {
  model: fc.oneof(fc.constant('builtin:tiny'), text),
  max_tokens: fc.oneof(small, anyValue),
  temperature: fc.oneof(fc.double({ min: 0, max: 2, noNaN: true }), anyValue),
  top_p: fc.oneof(fc.double({ min: 0.01, max: 1, noNaN: true }), anyValue),
  top_k: fc.oneof(fc.constantFrom(-1, 0, 5, 2 ** 31 - 1, 2 ** 31), anyValue),
  n: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.constantFrom(33, 128, 129), anyValue),
  stop: fc.oneof(text, fc.array(text, { maxLength: 20 })),
  stop_token_ids: fc.oneof(fc.array(fc.nat(100), { maxLength: 4 }), fc.constant(new Array(1025).fill(1)), anyValue),
  seed: fc.oneof(fc.integer(), anyValue),
  stream: fc.oneof(fc.boolean(), anyValue),
  stream_options: fc.oneof(fc.constant({ include_usage: true }), anyValue),
  logprobs: fc.oneof(fc.integer({ min: 0, max: 21 }), fc.boolean(), anyValue),
  presence_penalty: fc.oneof(fc.double({ min: -2, max: 2, noNaN: true }), anyValue),
  ignore_eos: fc.oneof(fc.boolean(), anyValue),
  best_of: anyValue,
};
const completion = fc.record(
  {
    ...common,
    prompt: fc.oneof(
      text,
      fc.array(fc.integer({ min: 0, max: 31_000 }), { minLength: 1, maxLength: 40 }),
      fc.array(text, { maxLength: 3 }),
      anyValue,
    ),
  },
  { requiredKeys: [] },
);
const message = fc.record(
  {
    role: fc.oneof(fc.constantFrom('user', 'system', 'assistant', 'developer'), text),
    content: fc.oneof(text, anyValue),
  },
  { requiredKeys: [] },
);
const chat = fc.record(
  {
    ...common,
    messages: fc.oneof(fc.array(message, { maxLength: 3 }), anyValue),
    max_completion_tokens: fc.oneof(small, anyValue),
  },
  { requiredKeys: [] },
);

type Case =
  | { readonly kind: 'json'; readonly path: string; readonly method: string; readonly body: unknown }
  | { readonly kind: 'bytes'; readonly path: string; readonly bytes: Uint8Array }
  | { readonly kind: 'raw'; readonly request: string };

const RAW = [
  'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n',
  'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc',
  'GET /health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n',
  `GET /health HTTP/1.1\r\nHost: x\r\nX-A: ${'b'.repeat(20_000)}\r\n\r\n`,
  'BREW /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n',
  'GET / HTTP/9.9\r\n\r\n',
];

/** Requests that should succeed: small, every field in range. */
const valid = fc.record(
  {
    model: fc.constant('builtin:tiny'),
    prompt: fc.oneof(
      fc.string({ minLength: 1, maxLength: 20 }),
      fc.array(fc.integer({ min: 3, max: 30_000 }), { minLength: 1, maxLength: 30 }),
    ),
    max_tokens: small,
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    top_k: fc.integer({ min: -1, max: 50 }),
    n: fc.integer({ min: 1, max: 3 }),
    stop: fc.array(fc.string({ minLength: 1, maxLength: 4 }), { maxLength: 3 }),
    stream: fc.boolean(),
    logprobs: fc.integer({ min: 0, max: 3 }),
    seed: fc.integer(),
  },
  { requiredKeys: ['model', 'prompt', 'max_tokens'] },
);

const cases: fc.Arbitrary<Case> = fc.oneof(
  {
    weight: 3,
    arbitrary: valid.map((body) => ({ kind: 'json' as const, path: '/v1/completions', method: 'POST', body })),
  },
  {
    weight: 5,
    arbitrary: completion.map((body) => ({ kind: 'json' as const, path: '/v1/completions', method: 'POST', body })),
  },
  {
    weight: 3,
    arbitrary: chat.map((body) => ({ kind: 'json' as const, path: '/v1/chat/completions', method: 'POST', body })),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({
        path: fc.constantFrom('/v1/models', '/health', '/nope', '/v1/completions'),
        method: fc.constantFrom('GET', 'POST', 'DELETE'),
        body: anyValue,
      })
      .map((c) => ({ kind: 'json' as const, ...c })),
  },
  {
    weight: 1,
    arbitrary: fc
      .uint8Array({ maxLength: 64 })
      .map((bytes) => ({ kind: 'bytes' as const, path: '/v1/completions', bytes })),
  },
  { weight: 1, arbitrary: fc.constantFrom(...RAW).map((request) => ({ kind: 'raw' as const, request })) },
);

function isErrorShape(v: unknown): boolean {
  const e = (v as { error?: Record<string, unknown> } | null)?.error;
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof e['message'] === 'string' &&
    typeof e['type'] === 'string' &&
    typeof e['code'] === 'string' &&
    (e['param'] === null || typeof e['param'] === 'string')
  );
}

/** What is wrong with one answer, or null. */
function judge(status: number, contentType: string, text: string): string | null {
  if (status >= 500) return `${status}: ${text.slice(0, 200)}`;
  if (contentType.startsWith('text/event-stream')) {
    const events = text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6));
    if (events.at(-1) !== '[DONE]' && !events.some((e) => e.startsWith('{"error"')))
      return `a stream without [DONE]: ${text.slice(-200)}`;
    for (const e of events.filter((x) => x !== '[DONE]')) {
      const v = JSON.parse(e) as Record<string, unknown>;
      if (!Array.isArray(v['choices']) && !isErrorShape(v))
        return `a stream event outside the shape: ${e.slice(0, 200)}`;
    }
    return null;
  }
  if (status === 200 && text.startsWith('#')) return null; // /metrics text
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return `${status} with a non-JSON body: ${JSON.stringify(text.slice(0, 200))}`;
  }
  if (status >= 400) return isErrorShape(v) ? null : `${status} outside OpenAI's error shape: ${text.slice(0, 200)}`;
  return typeof v === 'object' && v !== null ? null : `${status} with a non-object body`;
}

function rawExchange(url: string, request: string): Promise<{ status: number; contentType: string; text: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let got = '';
    socket.on('data', (d) => (got += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0);
      const contentType = /content-type: ([^\r]+)/i.exec(got)?.[1] ?? '';
      resolve({ status, contentType, text: got.slice(got.indexOf('\r\n\r\n') + 4) });
    });
    socket.write(request);
    setTimeout(() => socket.end(), 2000).unref();
  });
}

async function send(
  url: string,
  c: Case,
  auth: string | undefined,
): Promise<{ status: number; contentType: string; text: string }> {
  if (c.kind === 'raw') return rawExchange(url, c.request);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    ...(auth === undefined ? {} : { authorization: `Bearer ${auth}` }),
  };
  const body = c.kind === 'bytes' ? c.bytes : c.method === 'GET' ? undefined : JSON.stringify(c.body);
  const response = await fetch(`${url}${c.path}`, {
    method: c.kind === 'bytes' ? 'POST' : c.method,
    headers,
    ...(body === undefined ? {} : { body }),
  });
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
    text: await response.text(),
  };
}

/** Sends `count` fuzzed requests, `concurrency` at a time; seeded, so a failure replays. */
export async function fuzzHttp(
  url: string,
  o: { count: number; seed: number; concurrency: number; apiKey?: string },
): Promise<FuzzReport> {
  const all = fc.sample(cases, { numRuns: o.count, seed: o.seed });
  const byStatus: Record<string, number> = {};
  const bad: string[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < all.length) {
      const c = all[next++] as Case;
      try {
        const answer = await send(url, c, o.apiKey);
        byStatus[answer.status] = (byStatus[answer.status] ?? 0) + 1;
        const wrong = answer.status === 0 ? 'no HTTP answer' : judge(answer.status, answer.contentType, answer.text);
        if (wrong !== null) bad.push(`${wrong} <- ${JSON.stringify(c).slice(0, 300)}`);
      } catch (error) {
        bad.push(`${String(error)} <- ${JSON.stringify(c).slice(0, 300)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  return { sent: all.length, byStatus, bad };
}
