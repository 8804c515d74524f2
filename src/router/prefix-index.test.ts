import { describe, expect, it } from 'vitest';
import { PrefixHasher } from '../pages/index.js';
import { choosePrefill, matchedBlocks, parsePrefixReport, type PrefixView } from './prefix-index.js';

const tokens = (n: number, first = 7): number[] => Array.from({ length: n }, (_, i) => first + i);
const hasher = new PrefixHasher('cluster-secret-0123456789abcdef');
const tag = (tenant: string): string => hasher.tenantTag(tenant);
const blockHashes = (tenant: string, ids: readonly number[], pageSize: number): string[] =>
  hasher.blockHashes(tag(tenant), ids, pageSize);
const view = (tenant: string, ids: readonly number[]): PrefixView =>
  parsePrefixReport({
    lookupTokens: 0,
    hitTokens: 0,
    tenants: { [tag(tenant)]: blockHashes(tenant, ids, 16) },
  }) as PrefixView;

describe('choosePrefill', () => {
  const prompt = tokens(100); // 6 full pages; the last token is never a hit, so 6 blocks can match

  it('picks the worker with the longest cached prefix of the tenant', () => {
    const c = [
      { address: 'a:1', inFlight: 0, prefix: view('t', tokens(32)) },
      { address: 'b:1', inFlight: 0, prefix: view('t', tokens(80)) },
    ];
    expect(choosePrefill(hasher, 't', prompt, 16, c)).toEqual({ by: 'prefix', address: 'b:1', matchedBlocks: 5 });
  });

  it("never matches another tenant's blocks: same tokens, other tenant -> load", () => {
    const c = [{ address: 'a:1', inFlight: 0, prefix: view('alice', prompt) }];
    expect(matchedBlocks(c[0]?.prefix, tag('bob'), blockHashes('bob', prompt, 16))).toBe(0);
    expect(matchedBlocks(c[0]?.prefix, tag('bob'), blockHashes('alice', prompt, 16))).toBe(0); // the index is keyed by tenant too
    expect(choosePrefill(hasher, 'bob', prompt, 16, c)).toEqual({ by: 'load', reason: 'no-match' });
  });

  it('keeps the load bound: no prefix pick above max(1, 1.5 x the mean)', () => {
    const hot = { address: 'a:1', inFlight: 3, prefix: view('t', prompt) };
    const cold = { address: 'b:1', inFlight: 1, prefix: undefined };
    // after the pick: hot 4, mean (3 + 1 + 1) / 2 = 2.5, bound 3.75 -> by load
    expect(choosePrefill(hasher, 't', prompt, 16, [hot, cold])).toEqual({
      by: 'load',
      reason: 'bound',
      holder: { address: 'a:1', matchedBlocks: 6 },
    });
    expect(
      choosePrefill(hasher, 't', prompt, 16, [
        { ...hot, inFlight: 2 },
        { ...cold, inFlight: 2 },
      ]).by,
    ).toBe('prefix'); // 3 <= 1.5 x 2.5
    expect(
      choosePrefill(hasher, 't', prompt, 16, [
        { ...hot, inFlight: 0 },
        { ...cold, inFlight: 0 },
      ]).by,
    ).toBe('prefix'); // max(1, ...)
  });

  it('routes by nothing it was not told: no report, no prefix', () => {
    expect(choosePrefill(hasher, 't', prompt, 16, [{ address: 'a:1', inFlight: 0, prefix: undefined }])).toEqual({
      by: 'load',
      reason: 'no-match',
    });
    expect(parsePrefixReport({ tenants: 'x' })).toBeUndefined();
  });
});

describe('prefix hashes keyed with the cluster secret', () => {
  const prompt = tokens(100);

  it('a report names no tenant, and without the secret a guessed prompt cannot be confirmed against it', () => {
    const report = { lookupTokens: 0, hitTokens: 0, tenants: { [tag('alice')]: blockHashes('alice', prompt, 16) } };
    expect(JSON.stringify(report)).not.toContain('alice');
    // An outsider who guesses the prompt and the tenant, with another secret or the old unkeyed scheme.
    for (const guesser of [new PrefixHasher('a-guessed-secret-0123456789abc'), new PrefixHasher('', true)]) {
      const guess = guesser.blockHashes(guesser.tenantTag('alice'), prompt, 16);
      expect(
        Object.values(report.tenants)
          .flat()
          .some((h) => guess.includes(h)),
      ).toBe(false);
    }
    // The router, holding the secret, still routes on it.
    expect(
      choosePrefill(hasher, 'alice', prompt, 16, [{ address: 'a:1', inFlight: 0, prefix: view('alice', prompt) }]),
    ).toMatchObject({ by: 'prefix', matchedBlocks: 6 });
  });

  it('negative control: under unkeyed-prefix-hashes an outsider confirms the guess and reads the tenant name', () => {
    const unkeyed = new PrefixHasher('cluster-secret-0123456789abcdef', true);
    const report = { [unkeyed.tenantTag('alice')]: unkeyed.blockHashes(unkeyed.tenantTag('alice'), prompt, 16) };
    expect(Object.keys(report)).toEqual(['alice']);
    const outsider = new PrefixHasher('', true);
    expect(outsider.blockHashes(outsider.tenantTag('alice'), prompt, 16)).toEqual(report['alice']);
  });
});
