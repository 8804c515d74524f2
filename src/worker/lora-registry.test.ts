import { describe, expect, it } from 'vitest';
import { asTenantId, FaultSet } from '../core/index.js';
import { LoraRegistry } from './lora-registry.js';

/** A LoraControl that records what the engine was told, and the requests running with each name. */
function engine() {
  const dropped: string[] = [];
  const running = new Map<string, number>();
  const control = {
    loadLora: (name: string) => Promise.resolve(`digest-of-${name}`),
    unloadLora: (name: string) => {
      dropped.push(name);
      return Promise.resolve();
    },
  };
  return { control, dropped, running, inUse: (name: string) => running.get(name) ?? 0 };
}

describe('LoraRegistry', () => {
  it('co-located: an unload while a request runs with the adapter is refused, and nothing is dropped', async () => {
    const e = engine();
    const registry = new LoraRegistry(e.control, e.inUse);
    await registry.load('a', '/a.gguf', 1, null);
    e.running.set('a', 1);
    expect(await registry.unload('a')).toBe('in-use');
    expect(registry.lookup('a', asTenantId('alice'))).toMatchObject({ kind: 'found' });
    e.running.set('a', 0);
    expect(await registry.unload('a')).toBe('unloaded');
    expect(e.dropped).toEqual(['a']);
    expect(await registry.unload('a')).toBe('unknown');
  });

  it('PD worker: the name goes at once, the weights stay until its last request under it ended', async () => {
    const e = engine();
    const registry = new LoraRegistry(e.control, e.inUse, { deferUnload: true });
    await registry.load('a', '/a.gguf', 1, null);
    e.running.set('a', 2);
    expect(await registry.unload('a')).toBe('unloaded');
    expect(registry.digestOf('a')).toBeUndefined(); // new Reserves and Prefills are refused
    expect(registry.numRetiring).toBe(1);
    expect(e.dropped).toEqual([]);
    await expect(registry.load('a', '/other.gguf', 1, null)).rejects.toThrow(/still run with it/);
    e.running.set('a', 1);
    await registry.settle();
    expect(e.dropped).toEqual([]);
    e.running.set('a', 0);
    await registry.settle();
    expect(e.dropped).toEqual(['a']);
    expect(registry.numRetiring).toBe(0);
    expect(await registry.load('a', '/other.gguf', 1, null)).toEqual({ name: 'a', digest: 'digest-of-a' });
  });

  it('negative control lora-unload-in-use: the weights are dropped under a running request', async () => {
    const e = engine();
    const registry = new LoraRegistry(e.control, e.inUse, {
      deferUnload: true,
      faults: new FaultSet(['lora-unload-in-use']),
    });
    await registry.load('a', '/a.gguf', 1, null);
    e.running.set('a', 1);
    expect(await registry.unload('a')).toBe('unloaded');
    expect(e.dropped).toEqual(['a']);
  });

  it('a restricted adapter is unknown to other tenants', async () => {
    const e = engine();
    const registry = new LoraRegistry(e.control, e.inUse);
    await registry.load('b', '/b.gguf', 1, ['bob']);
    expect(registry.lookup('b', asTenantId('alice'))).toEqual({ kind: 'unknown' });
    expect(registry.list(asTenantId('bob'))).toEqual(['b']);
    expect(registry.list(asTenantId('alice'))).toEqual([]);
  });
});
