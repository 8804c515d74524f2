// Per-key limits on a real `tessera serve`: the keys file's object form beside the old one; a key
// over its requests per minute gets 429 with Retry-After in OpenAI's rate_limit_error shape (the
// official client's RateLimitError, retries off), another tenant's key is served meanwhile, and
// /metrics counts the 429 and each tenant's tokens. A bad limit stops the server at start-up.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServer, useTestHome, writeJson, type Server } from './support/process.js';

const home = useTestHome();
let server: Server;
const KEYS = { 'sk-alice': { tenant: 'alice', requests_per_minute: 2 }, 'sk-bob': 'bob' };
const ARGS = ['--context-length', '256', '--kv-pages', '64'];
const ADMIN_KEY = 'sk-rate-limit-admin';

beforeAll(async () => {
  server = await startServer(
    ['--api-keys', await writeJson(home.dir, 'keys.json', KEYS), '--admin-key', ADMIN_KEY, ...ARGS],
    home.dir,
  );
});
afterAll(async () => {
  await server?.stop();
});

describe('a server whose keys file gives a key limits', () => {
  it("answers the key's third request in a minute 429 with Retry-After, and serves another tenant meanwhile", async () => {
    const alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-alice', maxRetries: 0 });
    for (let i = 0; i < 2; i++) await alice.completions.create({ model: 'builtin:tiny', prompt: 'x', max_tokens: 2 });
    const r = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-alice' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true }),
    });
    expect(r.status).toBe(429);
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await r.json()).toMatchObject({
      error: {
        type: 'rate_limit_error',
        code: 'rate_limit_exceeded',
        message: expect.stringMatching(/2 requests per minute/),
      },
    });
    const error = await alice.completions
      .create({ model: 'builtin:tiny', prompt: 'x', max_tokens: 2 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const bob = await server.client('sk-bob').completions.create({ model: 'builtin:tiny', prompt: 'x', max_tokens: 2 });
    expect(bob.choices).toHaveLength(1);
    // The per-tenant series are the admin's (a tenant's key or none sees no tenant names).
    const metrics = await (
      await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
    ).text();
    expect(metrics).toContain('tessera_tenant_rate_limited_total{tenant="alice",limit="requests_per_minute"} 2');
    expect(metrics).toMatch(/tessera_tenant_tokens_total\{tenant="bob",kind="completion"\} 2/);
  });

  it('refuses to start with a limit that is not a positive integer, naming the key by its number', async () => {
    const bad = await writeJson(home.dir, 'bad-keys.json', { 'sk-secret': { tenant: 'a', tokens_per_minute: 0 } });
    const r = await runCli(['serve', '--port', '0', '--api-keys', bad], home.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/key #1: tokens_per_minute must be a positive integer, got 0/);
    expect(r.stderr).not.toContain('sk-secret');
  });
});
