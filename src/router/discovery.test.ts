import { describe, expect, it } from 'vitest';
import { joinCheck } from './discovery.js';
import type { WorkerLimits } from './pair-policy.js';
import type { WorkerEntry } from './workers.js';

const LIMITS: WorkerLimits = {
  contextLength: 512,
  pageSize: 16,
  numPages: 64,
  kvBytesPerToken: 2048,
  kvDtype: 'f32',
  model: 'a11ce5a11ce5a11c',
};

const entry = (url: string, limits: WorkerLimits): WorkerEntry => ({
  url,
  role: 'decode',
  state: 'up',
  address: `${url}:9`,
  limits,
  pages: undefined,
  totals: { transferBytes: 0, checksumFailures: 0, tagMismatches: 0 },
  lastError: undefined,
  slowPolls: 0,
  polling: false,
  source: 'dns',
  admitted: true,
  draining: false,
  prefix: undefined,
});

describe('the join check of a worker found by DNS', () => {
  it('admits a worker with the KV layout of the cluster, and names the difference of one whose KV dtype differs', () => {
    const admitted = [entry('a', LIMITS)];
    expect(joinCheck(entry('b', LIMITS), admitted)).toBeUndefined();
    expect(joinCheck(entry('c', { ...LIMITS, kvDtype: 'f16' }), admitted)).toBe(
      "its KV layout (page 16 tokens, 2048 bytes per token, f16) differs from a's (page 16, 2048, f32)",
    );
    expect(joinCheck(entry('d', { ...LIMITS, pageSize: 32 }), admitted)).toMatch(/KV layout \(page 32 tokens/);
  });
});
