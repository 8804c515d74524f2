import { describe, expect, it } from 'vitest';
import { isConfigError } from '../core/index.js';
import { parseServeConfig } from './config.js';

describe('--kv-disk and --kv-disk-size', () => {
  it('are off by default', () => {
    expect(parseServeConfig({}, {}).kvDisk).toBeNull();
  });

  it('take a directory and a size (default 1 GiB)', () => {
    expect(parseServeConfig({ kvDisk: '/var/kv' }, {}).kvDisk).toEqual({ dir: '/var/kv', maxBytes: 1024 ** 3 });
    expect(parseServeConfig({ kvDisk: '/var/kv', kvDiskSize: '64MiB' }, {}).kvDisk).toEqual({
      dir: '/var/kv',
      maxBytes: 64 * 1024 ** 2,
    });
  });

  it('refuse a size without a directory, and a size that is not one', () => {
    const message = (f: () => unknown): string => {
      try {
        f();
      } catch (error) {
        if (isConfigError(error)) return error.message;
        throw error;
      }
      throw new Error('expected a ConfigError');
    };
    expect(message(() => parseServeConfig({ kvDiskSize: '1GiB' }, {}))).toMatch(/--kv-disk-size needs --kv-disk/);
    expect(message(() => parseServeConfig({ kvDisk: '/var/kv', kvDiskSize: 'lots' }, {}))).toMatch(/--kv-disk-size/);
  });
});
