import { describe, expect, it } from 'vitest';
import { ConfigError } from '../core/index.js';
import { parseApiKeys } from './config-api-keys.js';

const configError = (f: () => unknown): string => {
  try {
    f();
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error('no ConfigError');
};

describe('--api-keys with limits', () => {
  it('reads the object form beside the old one: a tenant and its limits', () => {
    const keys = parseApiKeys(
      JSON.stringify({
        'sk-a': { tenant: 'alice', requests_per_minute: 60, tokens_per_minute: 100000, max_concurrent_requests: 8 },
        'sk-a2': { tenant: 'alice', requests_per_minute: 60, tokens_per_minute: 100000, max_concurrent_requests: 8 },
        'sk-b': 'bob',
        'sk-c': { tenant: 'carol' },
      }),
      'k.json',
    );
    expect([...keys]).toEqual([
      [
        'sk-a',
        { tenant: 'alice', limits: { requestsPerMinute: 60, tokensPerMinute: 100000, maxConcurrentRequests: 8 } },
      ],
      [
        'sk-a2',
        { tenant: 'alice', limits: { requestsPerMinute: 60, tokensPerMinute: 100000, maxConcurrentRequests: 8 } },
      ],
      ['sk-b', 'bob'],
      ['sk-c', { tenant: 'carol', limits: {} }],
    ]);
  });

  it('refuses bad limits, unknown fields and disagreeing keys of one tenant, naming the key by its number only', () => {
    const error = (value: unknown): string => configError(() => parseApiKeys(JSON.stringify(value), 'k.json'));
    for (const bad of [0, -1, 1.5, '60', null, 2 ** 60]) {
      const message = error({ 'sk-secret': { tenant: 'a', requests_per_minute: bad } });
      expect(message).toMatch(/k\.json: key #1: requests_per_minute must be a positive integer/);
      expect(message).not.toContain('sk-secret');
    }
    expect(error({ 'sk-1': { tenant: 'a', rpm: 5 } })).toMatch(/key #1 has an unknown field "rpm"/);
    expect(error({ 'sk-1': { requests_per_minute: 5 } })).toMatch(/the tenant of key #1 is not a non-empty string/);
    expect(
      error({ 'sk-1': { tenant: 'a', tokens_per_minute: 5 }, 'sk-2': { tenant: 'a', tokens_per_minute: 6 } }),
    ).toMatch(/key #2 gives tenant "a" other limits than key #1/);
    expect(error({ 'sk-1': { tenant: 'a', tokens_per_minute: 5 }, 'sk-2': 'a' })).toMatch(
      /key #2 gives tenant "a" other limits/,
    );
    expect(error({ 'sk-1': ['a'] })).toMatch(/the tenant of key #1 is not a non-empty string/);
  });
});
