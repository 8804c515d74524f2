// Per-key limits: 429 with Retry-After in OpenAI's rate_limit_error shape, before any token;
// tokens per minute count prompt tokens at admission and completion tokens as generated; every
// tenant's requests, tokens, queue time and 429s in /metrics, with at most 64 tenants named.
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { asTenantId, type TenantId } from '../../core/index.js';
import { problemOf } from './errors.js';
import { MAX_NAMED_TENANTS, OTHER_TENANTS } from '../ops/metrics.js';
import { RateLimits, type ApiKeys, type ApiKeySpec, type KeyLimits } from './rate-limit.js';
import { FakeBackend, FakeClock, wordScript } from '../testing/fake-backend.js';
import { send, seriesValue, startTestServer, type TestServer } from '../testing/harness.js';

const ALICE = asTenantId('alice');
const keys = (limits: KeyLimits): ApiKeys =>
  new Map<string, TenantId | ApiKeySpec>([
    ['sk-alice', { tenant: ALICE, limits }],
    ['sk-bob', asTenantId('bob')],
  ]);

describe('RateLimits (pure: time is an argument)', () => {
  it('takes requests per minute from a bucket that refills continuously, and says when to retry', () => {
    const limits = new RateLimits(keys({ requestsPerMinute: 2 }));
    expect(limits.admit(ALICE, 5, 0).kind).toBe('admitted');
    expect(limits.admit(ALICE, 5, 0).kind).toBe('admitted');
    const refused = limits.admit(ALICE, 5, 0);
    expect(refused).toMatchObject({ kind: 'refused', limit: 'requests_per_minute', error: { retryAfterSeconds: 30 } });
    expect(limits.admit(ALICE, 5, 29_000).kind).toBe('refused');
    expect(limits.admit(ALICE, 5, 30_000).kind).toBe('admitted'); // one request refilled in 60/2 s
  });

  it('counts prompt tokens at admission and completion tokens as generated; a refusal takes nothing', () => {
    const limits = new RateLimits(keys({ tokensPerMinute: 100, requestsPerMinute: 1000 }));
    expect(limits.admit(ALICE, 60, 0).kind).toBe('admitted'); // 40 left
    expect(limits.admit(ALICE, 50, 0)).toMatchObject({ kind: 'refused', limit: 'tokens_per_minute' });
    expect(limits.admit(ALICE, 40, 0).kind).toBe('admitted'); // the refusal took no token: 0 left
    limits.chargeCompletion(ALICE, 30, 0); // -30: the bucket owes
    expect(limits.admit(ALICE, 1, 18_000)).toMatchObject({ kind: 'refused', error: { retryAfterSeconds: 1 } }); // -30 + 30 = 0
    expect(limits.admit(ALICE, 1, 19_000).kind).toBe('admitted');
    expect(limits.admit(ALICE, 101, 60_000)).toMatchObject({
      kind: 'refused',
      limit: 'tokens_per_minute',
      error: { message: expect.stringMatching(/can never be admitted/) },
    });
  });

  it('counts concurrent requests until each ends; other tenants and keys without limits are never refused', () => {
    const limits = new RateLimits(keys({ maxConcurrentRequests: 1 }));
    expect(limits.admit(ALICE, 1, 0).kind).toBe('admitted');
    expect(limits.admit(ALICE, 1, 0)).toMatchObject({ kind: 'refused', limit: 'max_concurrent_requests' });
    for (let i = 0; i < 5; i++) expect(limits.admit(asTenantId('bob'), 1e9, 0).kind).toBe('admitted');
    limits.release(ALICE);
    expect(limits.admit(ALICE, 1, 0).kind).toBe('admitted');
  });

  it("a refusal is a 429 problem: OpenAI's rate_limit_error, with its Retry-After", () => {
    const refused = new RateLimits(keys({ requestsPerMinute: 1 }));
    refused.admit(ALICE, 1, 0);
    const admission = refused.admit(ALICE, 1, 0);
    expect(admission.kind).toBe('refused');
    if (admission.kind !== 'refused') return;
    expect(problemOf(admission.error)).toMatchObject({ code: 'rate_limit_exceeded', retryAfterSeconds: 60 });
  });
});

describe('a server with per-key limits', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });
  const client = (url: string, apiKey: string): OpenAI => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0 });

  it('answers 429 with Retry-After and never calls the back end for the refused request', async () => {
    const clock = new FakeClock();
    t = await startTestServer({ apiKeys: keys({ requestsPerMinute: 1 }), clock });
    await client(t.url, 'sk-alice').completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 2 });
    const r = await send(
      t.url,
      'POST',
      '/v1/chat/completions',
      {
        messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 2,
        stream: true,
      },
      { authorization: 'Bearer sk-alice' },
    );
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('60');
    expect(r.json).toEqual({
      error: {
        type: 'rate_limit_error',
        code: 'rate_limit_exceeded',
        param: null,
        message: expect.stringMatching(/1 requests per minute/),
      },
    });
    const error = await client(t.url, 'sk-alice')
      .completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 2 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(t.backend.calls).toHaveLength(1);
    // Bob's key has no limits; Alice's refills with time.
    await client(t.url, 'sk-bob').completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 2 });
    clock.advance(60_000);
    await client(t.url, 'sk-alice').completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 2 });
    expect(t.backend.calls.map((c) => c.request.tenant)).toEqual(['alice', 'bob', 'alice']);
  });

  it('refuses a second concurrent request of a key while the first streams, and takes it once the first ended', async () => {
    const backend = new FakeBackend();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const words = wordScript();
    backend.script = async function* (request, signal) {
      if (backend.calls.length === 1) await gate;
      yield* words(request, signal);
    };
    t = await startTestServer({ apiKeys: keys({ maxConcurrentRequests: 1 }), backend });
    const first = client(t.url, 'sk-alice').completions.create({ model: 'fake-model', prompt: 'Hi', max_tokens: 2 });
    while (backend.calls.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const second = await send(
      t.url,
      'POST',
      '/v1/completions',
      { prompt: 'Hi', max_tokens: 2 },
      {
        authorization: 'Bearer sk-alice',
      },
    );
    expect([second.status, second.headers.get('retry-after'), second.json.error.code]).toEqual([
      429,
      '1',
      'rate_limit_exceeded',
    ]);
    release();
    await first;
    const third = await send(
      t.url,
      'POST',
      '/v1/completions',
      { prompt: 'Hi', max_tokens: 2 },
      {
        authorization: 'Bearer sk-alice',
      },
    );
    expect(third.status).toBe(200);
  });

  it("publishes each tenant's requests, tokens, queue time and 429s, naming at most 64 tenants", async () => {
    const clock = new FakeClock();
    const backend = new FakeBackend();
    backend.script = wordScript({ beforeToken: (i) => clock.advance(i === 0 ? 250 : 10) });
    const many = new Map<string, TenantId | ApiKeySpec>(
      Array.from({ length: MAX_NAMED_TENANTS + 6 }, (_, i) => [`sk-${i}`, asTenantId(`t${i}`)] as const),
    );
    many.set('sk-alice', { tenant: ALICE, limits: { requestsPerMinute: 1 } });
    t = await startTestServer({ apiKeys: many, adminKey: 'sk-admin', backend, clock });
    const auth = (key: string) => ({ authorization: `Bearer ${key}` });
    const body = { prompt: 'Hi', max_tokens: 3 };
    expect((await send(t.url, 'POST', '/v1/completions', body, auth('sk-alice'))).status).toBe(200);
    expect((await send(t.url, 'POST', '/v1/completions', body, auth('sk-alice'))).status).toBe(429);
    for (let i = 0; i < MAX_NAMED_TENANTS + 6; i++) await send(t.url, 'POST', '/v1/completions', body, auth(`sk-${i}`));
    const text = (await send(t.url, 'GET', '/metrics', undefined, auth('sk-admin'))).text; // only the admin sees tenants
    const line = (series: string): number | undefined => seriesValue(text, series);
    expect(line('tessera_tenant_requests_total{tenant="alice",outcome="finished"}')).toBe(1);
    expect(line('tessera_tenant_requests_total{tenant="alice",outcome="rate_limited"}')).toBe(1);
    expect(line('tessera_tenant_rate_limited_total{tenant="alice",limit="requests_per_minute"}')).toBe(1);
    expect(line('tessera_tenant_tokens_total{tenant="alice",kind="completion"}')).toBe(3);
    expect(line('tessera_tenant_tokens_total{tenant="alice",kind="prompt"}')).toBe(
      t.backend.calls[0]?.request.promptTokens.length,
    );
    expect(line('tessera_tenant_queue_seconds_sum{tenant="alice"}')).toBe(0.25);
    // alice took one name: t0..t62 are named, the last 7 share OTHER_TENANTS.
    expect(line(`tessera_tenant_requests_total{tenant="t${MAX_NAMED_TENANTS - 2}",outcome="finished"}`)).toBe(1);
    expect(
      line(`tessera_tenant_requests_total{tenant="t${MAX_NAMED_TENANTS - 1}",outcome="finished"}`),
    ).toBeUndefined();
    expect(line(`tessera_tenant_requests_total{tenant="${OTHER_TENANTS}",outcome="finished"}`)).toBe(7);
    const tenants = new Set([...text.matchAll(/tessera_tenant_requests_total\{tenant="([^"]*)"/g)].map((m) => m[1]));
    expect(tenants.size).toBe(MAX_NAMED_TENANTS + 1);
  });
});
