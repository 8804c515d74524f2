// Back-end failures get honest answers: the real status when nothing was sent yet (never 200),
// an SSE error event and no [DONE] when tokens already went out; the openai client raises on
// both. Client disconnects abort the back end's signal. Shutdown drains, then aborts.
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  AdmissionError,
  FaultSet,
  PageCheckError,
  TesseraError,
  TimeoutError,
  TransferError,
  asPageId,
  isAbortedError,
  type TesseraError as TesseraErrorType,
} from '../../core/index.js';
import {
  fakeCodec,
  failingScript,
  throwingScript,
  untilAbortScript,
  wordScript,
  type FakeScript,
} from '../testing/fake-backend.js';
import { send, sseData, startTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;
let client: OpenAI;
const logged: string[] = [];

beforeAll(async () => {
  t = await startTestServer({ logError: (message) => logged.push(message) });
  client = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(() => t.close());
afterEach(() => {
  t.backend.script = wordScript();
});

const FAILURES: readonly { readonly error: TesseraErrorType; readonly status: number }[] = [
  { error: new PageCheckError(asPageId(3), 'stamp-epoch', 'page 3 was never written in epoch 7'), status: 500 },
  { error: new TransferError('checksum mismatch on frame 2'), status: 502 },
  { error: new TimeoutError('KvDone', 5000), status: 504 },
  { error: new TesseraError('overloaded', 'too many requests waiting'), status: 503 },
  { error: new AdmissionError('pool_too_small', 'the prompt can never fit the prefill pool (32 tokens)'), status: 400 },
];

const OpenAIAPIError = OpenAI.APIError;

describe('a failure before the first token gets its real status, never 200', () => {
  for (const { error, status } of FAILURES) {
    for (const stream of [false, true]) {
      it(`${error.code}, ${stream ? 'streamed' : 'not streamed'}: ${status}`, async () => {
        t.backend.script = failingScript(0, error);
        const raw = await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 4, stream });
        expect(raw.status).toBe(status);
        expect(raw.json).toEqual({
          error: { message: error.message, type: expect.any(String), param: null, code: error.code },
        });
        const thrown = await client.completions
          .create({ model: 'fake-model', prompt: 'Hi', max_tokens: 4, stream })
          .catch((e: unknown) => e);
        expect(thrown).toBeInstanceOf(OpenAIAPIError);
        expect((thrown as InstanceType<typeof OpenAIAPIError>).status).toBe(status);
        expect((thrown as InstanceType<typeof OpenAIAPIError>).code).toBe(error.code);
      });
    }
  }

  it('negative control: with eager-stream-headers a pre-token failure is sent as 200', async () => {
    const faulty = await startTestServer({ faults: new FaultSet(['eager-stream-headers']) });
    try {
      faulty.backend.script = failingScript(0, new PageCheckError(asPageId(3), 'stamp-epoch', 'stale page'));
      const raw = await send(faulty.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 4, stream: true });
      // The defence is what makes the test above pass: without it the status is a lie.
      expect(raw.status).toBe(200);
      expect(sseData(raw.text).at(-1)).toContain('kv_page_check_failed');
    } finally {
      await faulty.close();
    }
  });

  it('answers a back end that throws a non-Tessera error with a generic 500 and logs it', async () => {
    t.backend.script = throwingScript(0, new RangeError('index 7 out of range'));
    const r = await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 4, stream: true });
    expect(r.status).toBe(500);
    expect(r.json.error).toEqual({ message: 'internal error', type: 'server_error', param: null, code: 'internal' });
    expect(logged.at(-1)).toMatch(/^back end failed request [0-9a-f]{8}-\d+$/);
  });

  it('answers a back end that ends without finishing with 500', async () => {
    t.backend.script = async function* () {
      yield* [];
    };
    const r = await send(t.url, 'POST', '/v1/chat/completions', {
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4,
    });
    expect(r.status).toBe(500);
    expect(r.json.error.code).toBe('internal');
  });

  it('answers 500 when generate() itself throws, and keeps serving', async () => {
    t.backend.script = () => {
      throw new Error('boom');
    };
    expect((await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 4 })).status).toBe(500);
    t.backend.script = wordScript();
    expect((await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 4 })).status).toBe(200);
  });

  it('answers 500 and counts `internal` when the tokenizer throws a bug, and keeps serving', async () => {
    const errors: string[] = [];
    const s = await startTestServer({
      codec: {
        ...fakeCodec,
        renderChat: () => {
          throw new TypeError('template bug');
        },
      },
      logError: (message) => errors.push(message),
    });
    try {
      const r = await send(s.url, 'POST', '/v1/chat/completions', {
        messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 1,
      });
      expect(r.status).toBe(500);
      expect(r.json.error).toEqual({ message: 'internal error', type: 'server_error', param: null, code: 'internal' });
      expect(errors).toEqual(['POST /v1/chat/completions failed']);
      expect(s.backend.calls).toHaveLength(0);
      expect((await outcomes(s.url))['internal']).toBe(1);
      expect((await send(s.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 1 })).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});

describe('a failure after tokens were sent', () => {
  const error = new PageCheckError(asPageId(5), 'wrong-epoch', 'page 5 changed owner');

  it('ends the stream with an SSE error event and no [DONE]', async () => {
    t.backend.script = failingScript(2, error);
    const r = await send(t.url, 'POST', '/v1/chat/completions', {
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 9,
      stream: true,
    });
    expect(r.status).toBe(200);
    const events = sseData(r.text);
    expect(events).not.toContain('[DONE]');
    expect(JSON.parse(events.at(-1) as string)).toEqual({
      error: { message: error.message, type: 'server_error', param: null, code: 'kv_page_check_failed' },
    });
    expect(events.slice(0, -1).map((e) => JSON.parse(e).choices[0].delta)).toEqual([
      { role: 'assistant', content: '' },
      { content: 'Hello' },
      { content: ' world' },
    ]);
  });

  it('makes the openai client raise mid-iteration, after the tokens it got', async () => {
    t.backend.script = failingScript(2, error);
    const stream = await client.completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 9, stream: true });
    const texts: string[] = [];
    const thrown = await (async () => {
      for await (const chunk of stream) texts.push(chunk.choices[0]?.text ?? '');
    })().catch((e: unknown) => e);
    expect(texts).toEqual(['Hello', ' world']);
    expect(thrown).toBeInstanceOf(OpenAIAPIError);
    expect((thrown as InstanceType<typeof OpenAIAPIError>).code).toBe('kv_page_check_failed');
    expect((thrown as InstanceType<typeof OpenAIAPIError>).message).toBe(error.message);
  });
});

/** A script that reports when it has sent its tokens, so the client can leave then. */
function started(numTokens: number): { script: FakeScript; ready: Promise<void> } {
  let resolve: () => void = () => undefined;
  const ready = new Promise<void>((r) => (resolve = r));
  return { script: untilAbortScript(numTokens, resolve), ready };
}

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(condition()).toBe(true);
}

async function outcomes(url: string): Promise<Record<string, number>> {
  const text = (await send(url, 'GET', '/metrics')).text;
  return Object.fromEntries(
    [...text.matchAll(/^tessera_requests_total\{outcome="([a-z_]+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]),
  );
}

describe('client disconnects abort the request', () => {
  it('aborts the signal when the client leaves mid-stream, and counts it', async () => {
    const before = (await outcomes(t.url))['aborted'] ?? 0;
    const { script, ready } = started(2);
    t.backend.script = script;
    const controller = new AbortController();
    const response = await fetch(`${t.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Hi', max_tokens: 9, stream: true }),
      signal: controller.signal,
    });
    expect(response.status).toBe(200);
    await ready;
    controller.abort();
    const { signal } = t.backend.lastCall;
    await waitFor(() => signal.aborted);
    expect(isAbortedError(signal.reason)).toBe(true);
    await waitFor(() => t.server.numInFlight === 0);
    expect((await outcomes(t.url))['aborted']).toBe(before + 1);
  });

  it('aborts the signal when the client leaves before any answer (not streamed)', async () => {
    const { script, ready } = started(1);
    t.backend.script = script;
    const controller = new AbortController();
    const pending = fetch(`${t.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Hi', max_tokens: 9 }),
      signal: controller.signal,
    }).catch((e: unknown) => e);
    await ready;
    controller.abort();
    await pending;
    const { signal } = t.backend.lastCall;
    await waitFor(() => signal.aborted);
    t.backend.script = wordScript();
    expect((await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 1 })).status).toBe(200);
  });
});

describe('close()', () => {
  it('lets in-flight requests finish, then refuses new connections', async () => {
    const s = await startTestServer();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    s.backend.script = async function* (request, signal) {
      await gate;
      yield* wordScript()(request, signal);
    };
    const pending = send(s.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 2 });
    await waitFor(() => s.backend.calls.length === 1);
    const closing = s.close();
    release();
    expect((await pending).status).toBe(200);
    await closing;
    await expect(fetch(`${s.url}/health`)).rejects.toThrow();
  });

  it('aborts requests still running after the drain timeout', async () => {
    const s = await startTestServer({ drainTimeoutMs: 50 });
    const { script, ready } = started(1);
    s.backend.script = script;
    const pending = send(s.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 9, stream: true });
    await ready;
    await s.close();
    expect(s.backend.lastCall.signal.aborted).toBe(true);
    const r = await pending;
    expect(r.status).toBe(200);
    expect(sseData(r.text).at(-1)).toContain('"code":"aborted"');
    expect(r.text).not.toContain('[DONE]');
  });
});
