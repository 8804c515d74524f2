import { describe, expect, it } from 'vitest';
import { blockHashes } from '../pages/index.js';
import { choosePrefill, matchedBlocks, parsePrefixReport, type PrefixView } from './prefix-index.js';

const tokens = (n: number, first = 7): number[] => Array.from({ length: n }, (_, i) => first + i);
const view = (tenant: string, ids: readonly number[]): PrefixView =>
  parsePrefixReport({
    lookupTokens: 0,
    hitTokens: 0,
    tenants: { [tenant]: blockHashes(tenant, ids, 16) },
  }) as PrefixView;

describe('choosePrefill', () => {
  const prompt = tokens(100); // 6 full pages; the last token is never a hit, so 6 blocks can match

  it('picks the worker with the longest cached prefix of the tenant', () => {
    const c = [
      { address: 'a:1', inFlight: 0, prefix: view('t', tokens(32)) },
      { address: 'b:1', inFlight: 0, prefix: view('t', tokens(80)) },
    ];
    expect(choosePrefill('t', prompt, 16, c)).toEqual({ by: 'prefix', address: 'b:1', matchedBlocks: 5 });
  });

  it("never matches another tenant's blocks: same tokens, other tenant -> load", () => {
    const c = [{ address: 'a:1', inFlight: 0, prefix: view('alice', prompt) }];
    expect(matchedBlocks(c[0]?.prefix, 'bob', blockHashes('bob', prompt, 16))).toBe(0);
    expect(matchedBlocks(c[0]?.prefix, 'bob', blockHashes('alice', prompt, 16))).toBe(0); // the index is keyed by tenant too
    expect(choosePrefill('bob', prompt, 16, c)).toEqual({ by: 'load', reason: 'no-match' });
  });

  it('keeps the load bound: no prefix pick above max(1, 1.5 x the mean)', () => {
    const hot = { address: 'a:1', inFlight: 3, prefix: view('t', prompt) };
    const cold = { address: 'b:1', inFlight: 1, prefix: undefined };
    // after the pick: hot 4, mean (3 + 1 + 1) / 2 = 2.5, bound 3.75 -> by load
    expect(choosePrefill('t', prompt, 16, [hot, cold])).toEqual({ by: 'load', reason: 'bound' });
    expect(
      choosePrefill('t', prompt, 16, [
        { ...hot, inFlight: 2 },
        { ...cold, inFlight: 2 },
      ]).by,
    ).toBe('prefix'); // 3 <= 1.5 x 2.5
    expect(
      choosePrefill('t', prompt, 16, [
        { ...hot, inFlight: 0 },
        { ...cold, inFlight: 0 },
      ]).by,
    ).toBe('prefix'); // max(1, ...)
  });

  it('routes by nothing it was not told: no report, no prefix', () => {
    expect(choosePrefill('t', prompt, 16, [{ address: 'a:1', inFlight: 0, prefix: undefined }])).toEqual({
      by: 'load',
      reason: 'no-match',
    });
    expect(parsePrefixReport({ tenants: 'x' })).toBeUndefined();
  });
});
