// The probe's HTTP client of an OpenAI-compatible endpoint: completions, streamed or not, cut
// at a chosen phase; raw bodies for the malformed-input checks; and a log of every request
// sent, with status, timings and text, for the JSON report.
// Owns: the wire (fetch, SSE parsing, timing). Must never: judge what came back (checks do).
import type { CheckName, RequestRecord, Tenant } from './types.js';

/** Where a streamed request is cut: not at all, before any byte comes back, at the headers, or after some events. */
export type StreamCut =
  | { readonly kind: 'none' }
  | { readonly kind: 'before-response'; readonly afterMs: number }
  | { readonly kind: 'at-headers' }
  | { readonly kind: 'after-events'; readonly events: number };

export class ProbeConnectionError extends Error {
  override readonly name = 'ProbeConnectionError' as const;
}

export interface ClientOptions {
  readonly baseUrl: string;
  readonly keys: { readonly A: string; readonly B: string };
  readonly extraBody: { readonly A: Record<string, unknown>; readonly B: Record<string, unknown> };
  readonly timeoutMs: number;
  readonly now: () => number;
}

type Choice = { text?: string; message?: { content?: string }; token_ids?: unknown };

export class ProbeClient {
  readonly #o: ClientOptions;
  readonly #log: RequestRecord[] = [];
  #check: CheckName | 'setup' = 'setup';

  constructor(options: ClientOptions) {
    this.#o = { ...options, baseUrl: options.baseUrl.replace(/\/+$/, '') };
  }

  get log(): readonly RequestRecord[] {
    return this.#log;
  }

  /** Requests sent so far for one check. */
  countFor(check: CheckName): number {
    return this.#log.filter((r) => r.check === check).length;
  }

  /** Every request from now on is filed under this check. */
  setCheck(check: CheckName | 'setup'): void {
    this.#check = check;
  }

  #record(tenant: Tenant, method: string, path: string, body: unknown, purpose: string): RequestRecord {
    const record: RequestRecord = {
      id: this.#log.length + 1,
      check: this.#check,
      tenant,
      method,
      path,
      body,
      purpose,
      startMs: this.#o.now(),
      status: null,
    };
    this.#log.push(record);
    return record;
  }

  #headers(tenant: Tenant): Record<string, string> {
    return { 'content-type': 'application/json', authorization: `Bearer ${this.#o.keys[tenant]}` };
  }

  /** GET /v1/models; a connection failure is a ProbeConnectionError (exit 2). */
  async models(): Promise<{ status: number; body: unknown }> {
    const record = this.#record('A', 'GET', '/v1/models', null, 'learn the model and its context length');
    try {
      const response = await fetch(`${this.#o.baseUrl}/v1/models`, {
        headers: this.#headers('A'),
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
      record.status = response.status;
      const body = (await response.json().catch(() => null)) as unknown;
      record.totalMs = this.#o.now() - record.startMs;
      return { status: response.status, body };
    } catch (error) {
      record.error = String(error);
      throw new ProbeConnectionError(
        `cannot reach ${this.#o.baseUrl}/v1/models: ` +
          `${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`,
      );
    }
  }

  /**
   * GET or POST a JSON endpoint beside the OpenAI API (llama-server's /props, Ollama's /api/show):
   * never throws; status null and error set when the server did not answer.
   */
  async json(
    method: 'GET' | 'POST',
    path: string,
    purpose: string,
    body?: Record<string, unknown>,
  ): Promise<{ status: number | null; body: unknown }> {
    const record = this.#record('A', method, path, body ?? null, purpose);
    try {
      const response = await fetch(`${this.#o.baseUrl}${path}`, {
        method,
        headers: this.#headers('A'),
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
      record.status = response.status;
      const json = (await response.json().catch(() => null)) as unknown;
      if (!response.ok) record.errorBody = json;
      record.totalMs = this.#o.now() - record.startMs;
      return { status: response.status, body: json };
    } catch (error) {
      record.error = describe(error);
      record.totalMs = this.#o.now() - record.startMs;
      return { status: null, body: null };
    }
  }

  /** POST /v1/completions, not streamed. */
  async complete(tenant: Tenant, purpose: string, body: Record<string, unknown>): Promise<RequestRecord> {
    const full = { ...body, ...this.#o.extraBody[tenant] };
    const record = this.#record(tenant, 'POST', '/v1/completions', full, purpose);
    try {
      const response = await fetch(`${this.#o.baseUrl}/v1/completions`, {
        method: 'POST',
        headers: this.#headers(tenant),
        body: JSON.stringify(full),
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
      record.status = response.status;
      const json = (await response.json().catch(() => null)) as {
        choices?: Choice[];
        usage?: unknown;
        error?: unknown;
      } | null;
      if (response.ok) {
        record.texts = (json?.choices ?? []).map((c) => c.text ?? c.message?.content ?? '');
        record.usage = json?.usage;
        const ids = json?.choices?.[0]?.token_ids;
        if (Array.isArray(ids) && ids.every((t) => Number.isInteger(t))) record.tokenIds = ids as number[];
      } else {
        record.errorBody = json;
      }
    } catch (error) {
      record.error = describe(error);
    }
    record.totalMs = this.#o.now() - record.startMs;
    return record;
  }

  /** POST /v1/completions with stream: true; TTFT is the time to the first event carrying text. */
  async stream(
    tenant: Tenant,
    purpose: string,
    body: Record<string, unknown>,
    cut: StreamCut = { kind: 'none' },
  ): Promise<RequestRecord> {
    const full = { ...body, ...this.#o.extraBody[tenant], stream: true };
    const record = this.#record(tenant, 'POST', '/v1/completions', full, purpose);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error('timed out')), this.#o.timeoutMs);
    if (cut.kind === 'before-response')
      setTimeout(() => controller.abort(new Error('cut before the response')), cut.afterMs);
    let text = '';
    let events = 0;
    try {
      const response = await fetch(`${this.#o.baseUrl}/v1/completions`, {
        method: 'POST',
        headers: this.#headers(tenant),
        body: JSON.stringify(full),
        signal: controller.signal,
      });
      record.status = response.status;
      if (cut.kind === 'at-headers') {
        controller.abort(new Error('cut at the headers'));
        record.error = 'cut at the headers';
        return record;
      }
      if (!response.ok || response.body === null) {
        record.errorBody = (await response.json().catch(() => null)) as unknown;
        return record;
      }
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(bytes, { stream: true });
        let at: number;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          for (const line of event.split('\n')) {
            if (!line.startsWith('data:')) continue;
            const data = line.slice(5).trim();
            if (data === '[DONE]') continue;
            const json = JSON.parse(data) as { choices?: Choice[]; usage?: unknown; error?: unknown };
            if (json.error !== undefined) record.errorBody = json;
            if (json.usage !== undefined && json.usage !== null) record.usage = json.usage;
            const piece = (json.choices ?? []).map((c) => c.text ?? '').join('');
            if (piece !== '' && record.ttftMs === undefined) record.ttftMs = this.#o.now() - record.startMs;
            text += piece;
            events++;
          }
          if (cut.kind === 'after-events' && events >= cut.events) {
            controller.abort(new Error(`cut after ${events} events`));
            record.error = `cut after ${events} events`;
            return record;
          }
        }
      }
    } catch (error) {
      record.error ??= describe(error);
    } finally {
      clearTimeout(timer);
      record.texts = [text];
      record.totalMs = this.#o.now() - record.startMs;
    }
    return record;
  }

  /** POST a raw body (malformed JSON, wrong types) to a path. */
  async raw(tenant: Tenant, purpose: string, path: string, bodyText: string): Promise<RequestRecord> {
    const record = this.#record(tenant, 'POST', path, bodyText, purpose);
    try {
      const response = await fetch(`${this.#o.baseUrl}${path}`, {
        method: 'POST',
        headers: this.#headers(tenant),
        body: bodyText,
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
      record.status = response.status;
      record.errorBody = (await response.json().catch(() => null)) as unknown;
    } catch (error) {
      record.error = describe(error);
    }
    record.totalMs = this.#o.now() - record.startMs;
    return record;
  }
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}

/** The OpenAI error shape: {"error": {"message": string, "type": string, ...}}. */
export function isOpenAiError(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const error = (body as { error?: unknown }).error;
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as { message?: unknown }).message === 'string' &&
    typeof (error as { type?: unknown }).type === 'string'
  );
}
