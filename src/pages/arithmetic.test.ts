import { describe, expect, it } from 'vitest';
import { InvariantError } from '../core/index.js';
import {
  kvBytesPerPage,
  kvBytesPerToken,
  kvBytesPerTokenPerLayer,
  pagesFor,
  pagesInBytes,
  tokensIn,
} from './arithmetic.js';

describe('KV arithmetic', () => {
  it('costs a Llama-2-7B token 512 KiB in f16 (32 layers, 32 KV heads of 128)', () => {
    const shape = { numLayers: 32, numKvHeads: 32, headDim: 128, bytesPerElement: 2 };
    expect(kvBytesPerTokenPerLayer(shape)).toBe(16_384);
    expect(kvBytesPerToken(shape)).toBe(524_288);
    expect(kvBytesPerPage(shape, 16)).toBe(8_388_608);
  });

  it('costs a grouped-query TinyLlama token 22,528 bytes in f16 (22 layers, 4 KV heads of 64)', () => {
    expect(kvBytesPerToken({ numLayers: 22, numKvHeads: 4, headDim: 64, bytesPerElement: 2 })).toBe(22_528);
  });

  it('rounds pages for tokens up, and pages that fit in memory down', () => {
    expect([0, 1, 15, 16, 17].map((n) => pagesFor(n, 16))).toEqual([0, 1, 1, 1, 2]);
    expect(tokensIn(3, 16)).toBe(48);
    expect(pagesInBytes(8_388_607, 8_388_608)).toBe(0);
    expect(pagesInBytes(3 * 8_388_608 + 1, 8_388_608)).toBe(3);
  });

  it("shows the incident's misconfiguration: a 1,048,576-token context needs more pages than a 681,280-token pool has", () => {
    const poolPages = pagesFor(681_280, 64);
    expect(poolPages).toBe(10_645);
    expect(pagesFor(1_048_576, 64)).toBe(16_384);
    expect(tokensIn(poolPages, 64)).toBeLessThan(1_048_576);
  });

  it('refuses nonsense instead of returning NaN', () => {
    expect(() => pagesFor(-1, 16)).toThrow(InvariantError);
    expect(() => pagesFor(10, 0)).toThrow(InvariantError);
    expect(() => pagesFor(1.5, 16)).toThrow(InvariantError);
    expect(() => kvBytesPerToken({ numLayers: 0, numKvHeads: 1, headDim: 1, bytesPerElement: 4 })).toThrow(
      InvariantError,
    );
  });
});
