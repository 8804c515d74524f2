// --admin-key / TESSERA_ADMIN_KEY: the flag wins, none means off, short or spaced keys exit 2.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../core/index.js';
import { parseAdminKey } from './config-admin.js';

describe('parseAdminKey', () => {
  it('is null (the dashboard off) when neither the flag nor the environment gives one', () => {
    expect(parseAdminKey({}, {})).toBeNull();
    expect(parseAdminKey({}, { TESSERA_ADMIN_KEY: '' })).toBeNull();
  });
  it('takes the flag before the environment', () => {
    expect(parseAdminKey({ adminKey: 'flag-key-0123456789' }, { TESSERA_ADMIN_KEY: 'env-key-0123456789' })).toBe(
      'flag-key-0123456789',
    );
    expect(parseAdminKey({}, { TESSERA_ADMIN_KEY: 'env-key-0123456789' })).toBe('env-key-0123456789');
  });
  it('refuses a key under 16 characters or with spaces', () => {
    expect(() => parseAdminKey({ adminKey: 'short' }, {})).toThrow(ConfigError);
    expect(() => parseAdminKey({ adminKey: 'has a space in it, long' }, {})).toThrow(
      /at least 16 characters without spaces/,
    );
  });
});
