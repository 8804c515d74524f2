// Tenants come from API keys, never from the request body: 401 without a valid key when keys
// are configured, DEFAULT_TENANT for everyone when they are not.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_TENANT, FaultSet, NO_FAULTS, asTenantId } from '../../core/index.js';
import { send, startTestServer, type TestServer } from '../testing/harness.js';

const KEYS = new Map([
  ['key-alice', asTenantId('alice')],
  ['key-bob', asTenantId('bob')],
]);

describe('with API keys', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ apiKeys: KEYS });
  });
  afterAll(() => t.close());

  it('answers a request without a key with 401 and never calls the back end', async () => {
    const r = await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 1 });
    expect(r.status).toBe(401);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
    expect(t.backend.calls).toHaveLength(0);
  });

  it('answers a wrong key with 401, parsed by the openai client', async () => {
    const client = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'key-mallory', maxRetries: 0 });
    const error = await client.completions
      .create({ model: 'fake-model', prompt: 'Hi', max_tokens: 1 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
    expect((error as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');
    expect(t.backend.calls).toHaveLength(0);
    await expect(client.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('derives the tenant from the key, whatever the body claims', async () => {
    const alice = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'key-alice', maxRetries: 0 });
    const bob = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'key-bob', maxRetries: 0 });
    await alice.completions.create({
      model: 'fake-model',
      prompt: 'Hi',
      max_tokens: 1,
      user: 'bob',
      tenant: 'bob',
    } as never);
    expect(t.backend.lastCall.request.tenant).toBe('alice');
    await bob.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 1,
    });
    expect(t.backend.lastCall.request.tenant).toBe('bob');
  });

  it('leaves /health and /metrics open', async () => {
    expect((await send(t.url, 'GET', '/health')).status).toBe(200);
    expect((await send(t.url, 'GET', '/metrics')).text).toContain('tessera_requests_total{outcome="unauthorized"} 2');
  });

  it('answers a stranger only up or down on /health, and /health?probe=live 200 even when the back end is down', async () => {
    expect(JSON.parse((await send(t.url, 'GET', '/health')).text)).toEqual({ status: 'ok' });
    const healthy = t.backend.health;
    t.backend.health = async () => ({ healthy: false, detail: { backend: 'fake', why: 'no workers' } });
    try {
      const down = await send(t.url, 'GET', '/health');
      expect([down.status, JSON.parse(down.text)]).toEqual([503, { status: 'unhealthy' }]);
      const live = await send(t.url, 'GET', '/health?probe=live');
      expect([live.status, JSON.parse(live.text)]).toEqual([200, { status: 'alive' }]);
    } finally {
      t.backend.health = healthy;
    }
  });
});

describe("/health's detail with API keys", () => {
  /** What /health says to a stranger, a tenant and the admin key holder: its detail, or only its status. */
  async function healthSays(faults: FaultSet): Promise<string[]> {
    const t = await startTestServer({ apiKeys: KEYS, adminKey: 'key-admin', faults });
    try {
      const as = async (key: string | undefined) => {
        const r = await send(
          t.url,
          'GET',
          '/health',
          undefined,
          key === undefined ? {} : { authorization: `Bearer ${key}` },
        );
        return `${r.status} ${Object.keys(r.json as object).join(',')}`;
      };
      return [await as(undefined), await as('key-alice'), await as('key-admin')];
    } finally {
      await t.close();
    }
  }

  it('tells a stranger and a tenant only whether it is up; the admin key sees the detail', async () => {
    expect(await healthSays(NO_FAULTS)).toEqual(['200 status', '200 status', '200 status,backend']);
  });

  it('negative control: with open-health everyone sees the detail', async () => {
    expect(await healthSays(new FaultSet(['open-health']))).toEqual([
      '200 status,backend',
      '200 status,backend',
      '200 status,backend',
    ]);
  });
});

describe("/metrics' per-tenant series with API keys", () => {
  /** Whether a stranger, a tenant and the admin key holder see tenant names in /metrics, after alice's request. */
  async function metricsNameTenants(faults: FaultSet): Promise<boolean[]> {
    const t = await startTestServer({ apiKeys: KEYS, adminKey: 'key-admin', faults });
    try {
      const done = await send(
        t.url,
        'POST',
        '/v1/completions',
        { prompt: 'Hi', max_tokens: 1 },
        { authorization: 'Bearer key-alice' },
      );
      expect(done.status).toBe(200);
      const as = async (key: string | undefined) => {
        const r = await send(
          t.url,
          'GET',
          '/metrics',
          undefined,
          key === undefined ? {} : { authorization: `Bearer ${key}` },
        );
        expect(r.status).toBe(200);
        expect(r.text).toContain('tessera_requests_total'); // the node-wide series stay open
        return r.text.includes('tessera_tenant_') || r.text.includes('alice');
      };
      return [await as(undefined), await as('key-bob'), await as('key-admin')];
    } finally {
      await t.close();
    }
  }

  it('names tenants only to the admin key: a tenant does not learn who else uses the server, or how much', async () => {
    expect(await metricsNameTenants(NO_FAULTS)).toEqual([false, false, true]);
  });

  it('negative control: with open-tenant-metrics everyone sees them', async () => {
    expect(await metricsNameTenants(new FaultSet(['open-tenant-metrics']))).toEqual([true, true, true]);
  });
});

describe('without API keys', () => {
  it('serves everyone as the default tenant, ignoring any key sent', async () => {
    const t = await startTestServer();
    try {
      const r = await send(
        t.url,
        'POST',
        '/v1/completions',
        { prompt: 'Hi', max_tokens: 1 },
        { authorization: 'Bearer key-alice' },
      );
      expect(r.status).toBe(200);
      expect(t.backend.lastCall.request.tenant).toBe(DEFAULT_TENANT);
    } finally {
      await t.close();
    }
  });
});
