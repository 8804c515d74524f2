import { describe, expect, it } from 'vitest';
import { ConfigError } from '../core/index.js';
import { parseCpuPins, pinnedCommand } from './cpu-pinning.js';

describe('--cpus', () => {
  it('pins each named role to its CPU list; roles left out run anywhere', () => {
    const pins = parseCpuPins('prefill=0,decode=1-2,router=0+3');
    expect([...pins]).toEqual([
      ['prefill', '0'],
      ['decode', '1-2'],
      ['router', '0,3'],
    ]);
    const pinned = pinnedCommand(pins, 'decode', '/usr/bin/node', ['bin/tessera.js', 'serve']);
    expect(pinned.command).toMatch(/taskset$/);
    expect(pinned.args).toEqual(['-c', '1-2', '/usr/bin/node', 'bin/tessera.js', 'serve']);
    expect(pinnedCommand(parseCpuPins('prefill=0'), 'router', 'node', ['x'])).toEqual({ command: 'node', args: ['x'] });
  });

  it('refuses what it cannot read, naming the flag', () => {
    for (const bad of ['prefill', 'gpu=0', 'prefill=a', 'prefill=0,prefill=1', 'decode=0,1']) {
      expect(() => parseCpuPins(bad), bad).toThrow(ConfigError);
    }
    expect(() => parseCpuPins('gpu=0')).toThrow(/--cpus/);
  });
});
