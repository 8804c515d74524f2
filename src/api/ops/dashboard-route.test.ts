// /dashboard and /dashboard/state: off (404) without an admin key; with one, 401 for no key, an
// ordinary API key or a wrong key, 200 for the admin key (header or ?key=); the page is one
// self-contained document; the state carries the back end's map, the plan and outcomes by code.
// Negative control: the `open-dashboard` fault point serves the page map to anyone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asTenantId, FaultSet, type PageMap } from '../../core/index.js';
import { FakeBackend } from '../testing/fake-backend.js';
import { send, startTestServer, type TestServer } from '../testing/harness.js';

const ADMIN = 'admin-key-0123456789abcdef';
const TENANT_MAP: PageMap = {
  kind: 'node',
  role: 'colocated',
  node: 'colocated',
  pageSize: 16,
  numPages: 3,
  states: 'afc',
  epochs: [7, 0, 5],
  holderOf: [0, null, 1],
  holders: [
    { tenant: 'acme', rid: 'r-1' },
    { tenant: 'globex', rid: null },
  ],
  transfers: [],
  quarantined: [],
  running: 1,
  waiting: 0,
  loop: { numSteps: 3, numTokensSampled: 3, stepMsTotal: 1.5, numItemsStepped: 3 },
  totals: {},
};

function backendWithTenants(): FakeBackend {
  const backend = new FakeBackend();
  backend.pageMap = async () => TENANT_MAP;
  return backend;
}

const servers: TestServer[] = [];
let off: TestServer;
let on: TestServer;
let open: TestServer;
beforeAll(async () => {
  const apiKeys = new Map([['user-key', asTenantId('acme')]]);
  off = await startTestServer({ backend: backendWithTenants(), apiKeys });
  on = await startTestServer({
    backend: backendWithTenants(),
    apiKeys,
    dashboard: { adminKey: ADMIN, plan: ['pool  3 pages'] },
  });
  open = await startTestServer({
    backend: backendWithTenants(),
    faults: new FaultSet(['open-dashboard']),
    dashboard: { adminKey: ADMIN, plan: [] },
  });
  servers.push(off, on, open);
});
afterAll(() => Promise.all(servers.map((s) => s.close())));

describe('the dashboard without an admin key', () => {
  it('does not exist: 404 on both paths, even with an API key', async () => {
    for (const path of ['/dashboard', '/dashboard/state']) {
      const r = await send(off.url, 'GET', path, undefined, { authorization: 'Bearer user-key' });
      expect(r.status).toBe(404);
      expect(r.json.error.type).toBe('not_found_error');
      expect(r.text).not.toContain('acme');
    }
  });
});

describe('the dashboard with an admin key', () => {
  it('answers 401 without a key, to an ordinary API key, and to a wrong key', async () => {
    for (const path of ['/dashboard', '/dashboard/state']) {
      for (const headers of [{}, { authorization: 'Bearer user-key' }, { authorization: `Bearer ${ADMIN}x` }] as Record<
        string,
        string
      >[]) {
        const r = await send(on.url, 'GET', path, undefined, headers);
        expect(r.status).toBe(401);
        expect(r.json.error.type).toBe('invalid_request_error'); // OpenAI's 401
        expect(r.json.error.code).toBe('invalid_api_key');
        expect(r.text).not.toContain('globex');
      }
      expect((await send(on.url, 'GET', `${path}?key=user-key`)).status).toBe(401);
    }
  });

  it('serves one self-contained page to the admin key, by header or ?key=', async () => {
    for (const r of [
      await send(on.url, 'GET', '/dashboard', undefined, { authorization: `Bearer ${ADMIN}` }),
      await send(on.url, 'GET', `/dashboard?key=${ADMIN}`),
    ]) {
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(r.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(r.text).toMatch(/^<!doctype html>/);
      // No external asset: no src= or href= but data: URIs (the empty favicon), no http(s) URL but the SVG namespace.
      expect(r.text).not.toMatch(/\s(src|href)="(?!data:)/);
      expect(r.text.replaceAll('http://www.w3.org/2000/svg', '')).not.toMatch(/https?:\/\//);
    }
  });

  it('answers the page map, the plan and the outcomes by code to the admin key', async () => {
    await send(
      on.url,
      'POST',
      '/v1/completions',
      { model: 'fake-model', prompt: 'hi', max_tokens: 2 },
      { authorization: 'Bearer user-key' },
    );
    await send(
      on.url,
      'POST',
      '/v1/completions',
      { model: 'fake-model', prompt: 'hi', max_tokens: 999 },
      { authorization: 'Bearer user-key' },
    );
    const r = await send(on.url, 'GET', '/dashboard/state', undefined, { authorization: `Bearer ${ADMIN}` });
    expect(r.status).toBe(200);
    expect(r.json.map).toEqual(TENANT_MAP);
    expect(r.json.plan).toEqual(['pool  3 pages']);
    expect(r.json.outcomes).toMatchObject({ success: 1, context_length_exceeded: 1 });
    expect(typeof r.json.atMs).toBe('number');
  });
});

describe('the negative control', () => {
  it('open-dashboard: the page map, tenants and all, goes to a request without any key', async () => {
    const r = await send(open.url, 'GET', '/dashboard/state');
    expect(r.status).toBe(200);
    expect(JSON.stringify(r.json.map.holders)).toContain('globex');
  });
});
