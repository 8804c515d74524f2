// Test support: start an API server over a FakeBackend on 127.0.0.1, port 0.
// Must never be imported by production code.
import OpenAI from 'openai';
import { createApiServer, type ApiServer, type ApiServerOptions } from '../http/server.js';
import { FakeBackend, fakeCodec } from './fake-backend.js';

export interface TestServer {
  readonly server: ApiServer;
  readonly backend: FakeBackend;
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  close(): Promise<void>;
}

export async function startTestServer(
  options: Omit<Partial<ApiServerOptions>, 'backend'> & {
    readonly backend?: FakeBackend;
    readonly contextLength?: number;
  } = {},
): Promise<TestServer> {
  const backend = options.backend ?? new FakeBackend({ contextLength: options.contextLength ?? 64 });
  const server = createApiServer({ codec: fakeCodec, seed: 42, drainTimeoutMs: 2_000, ...options, backend });
  const { port } = await server.listen(0, '127.0.0.1');
  return { server, backend, url: `http://127.0.0.1:${port}`, close: () => server.close() };
}

/** A test server (context 64 unless told) and the official `openai` client pointed at it, without retries. */
export async function startSdkTestServer(
  options: Parameters<typeof startTestServer>[0] = { contextLength: 64 },
): Promise<{ readonly t: TestServer; readonly client: OpenAI }> {
  const t = await startTestServer(options);
  return { t, client: new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'unused', maxRetries: 0 }) };
}

/** Test servers started through it, closed together by closeAll (a test file's afterEach). */
export class TestServers {
  #open: TestServer[] = [];

  async start(options: Parameters<typeof startTestServer>[0] = {}): Promise<TestServer> {
    const s = await startTestServer(options);
    this.#open.push(s);
    return s;
  }

  async closeAll(): Promise<void> {
    const open = this.#open;
    this.#open = [];
    await Promise.all(open.map((s) => s.close()));
  }
}

export interface RawResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The parsed body, or undefined when it is not JSON. */
  readonly json: any;
}

/** A request with fetch; `body`: an object (sent as JSON), a string, or raw bytes. */
export async function send(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const payload =
    body === undefined || typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: payload as string | Uint8Array | undefined,
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** The `data:` payloads of an SSE body, in order. */
export function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) => {
      if (!event.startsWith('data: ')) throw new Error(`not an SSE data event: ${JSON.stringify(event)}`);
      return event.slice('data: '.length);
    });
}

/** The parsed JSON `data:` of each event of an SSE body whose events also name themselves (`event:`, the Responses API). */
export function sseEventData(text: string): unknown[] {
  return text
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) => {
      const data = event.split('\n').find((line) => line.startsWith('data: '));
      if (data === undefined) throw new Error(`an SSE event with no data: ${JSON.stringify(event)}`);
      return JSON.parse(data.slice('data: '.length)) as unknown;
    });
}

/** The value of one series (name and labels, as printed) in a Prometheus text exposition; undefined when absent. */
export function seriesValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
