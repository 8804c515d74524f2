import { describe, expect, it } from 'vitest';
import { parseAdminKey } from './config-admin.js';
import { parseApiKeys } from './config-api-keys.js';
import { httpLimitsFromEnv } from './config-http.js';

describe('issue 17 configuration', () => {
  it('refuses --api-keys tenants the cluster wire could not carry: over 256 characters, control characters', () => {
    expect(() => parseApiKeys(JSON.stringify({ 'sk-1': 'a'.repeat(257) }), 'k.json')).toThrow(
      /tenant of key #1: a tenant's name must have 1..256 characters/,
    );
    expect(() => parseApiKeys(JSON.stringify({ 'sk-1': 'ok', 'sk-2': 'bad\u0001name' }), 'k.json')).toThrow(
      /tenant of key #2: .*control characters/,
    );
    expect(parseApiKeys(JSON.stringify({ 'sk-1': 'a'.repeat(256) }), 'k.json').size).toBe(1);
  });

  it('reads TESSERA_HTTP_LIMITS and names an unknown limit', () => {
    expect(httpLimitsFromEnv({ TESSERA_HTTP_LIMITS: 'idleMs=1000, maxConnections=40' })).toEqual({
      idleMs: 1000,
      maxConnections: 40,
    });
    expect(httpLimitsFromEnv({})).toEqual({});
    expect(() => httpLimitsFromEnv({ TESSERA_HTTP_LIMITS: 'idle=5' })).toThrow(/unknown limit "idle"/);
  });

  it('takes the admin key from the flag or TESSERA_ADMIN_KEY, refusing a short one without echoing it', () => {
    expect(parseAdminKey({}, {})).toBeNull();
    expect(parseAdminKey({}, { TESSERA_ADMIN_KEY: 'k'.repeat(16) })).toBe('k'.repeat(16));
    expect(parseAdminKey({ adminKey: 'f'.repeat(20) }, { TESSERA_ADMIN_KEY: 'k'.repeat(16) })).toBe('f'.repeat(20));
    expect(() => parseAdminKey({ adminKey: 'short' }, {})).toThrow(/at least 16 characters/);
    expect(() => parseAdminKey({ adminKey: 'short' }, {})).not.toThrow(/short/);
  });
});
