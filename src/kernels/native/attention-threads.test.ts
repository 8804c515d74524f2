// The addon's attention with its (token, KV head) items shared with the helper threads
// (attention.c, dense.c's tesseraShare) gives exactly the bits the calling thread alone gives:
// every variant this CPU runs, f32 / f16 / q8_0 pools, GQA ratios from 1 to 8 (one uneven),
// head sizes that are not powers of two, contexts that end mid-page, a sliding window, prefill
// chunks (numTokens > 1) and a batch of requests over one pool, call after call; and the helpers
// did take items (their chunk count grew), so the equality is not the caller's alone.
import { beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../core/index.js';
import { expectBitwiseEqual, randomF32 } from '../cases/support.js';
import { addon, attendPaged, PAGE_SIZE, randomPool, type AttentionShape as Shape } from './attention-pools.js';
import { NativeDense, nativeVariantsHere, selectNativeVariant } from './native.js';

const SHAPES: readonly Shape[] = [
  { numHeads: 12, numKvHeads: 4, headDim: 64, startPos: 517, numTokens: 1, window: 0 }, // m100's decode
  { numHeads: 8, numKvHeads: 1, headDim: 80, startPos: 0, numTokens: 45, window: 0 }, // a prefill chunk, MQA
  { numHeads: 6, numKvHeads: 6, headDim: 48, startPos: 100, numTokens: 7, window: 33 }, // MHA, a window
  { numHeads: 5, numKvHeads: 2, headDim: 128, startPos: 300, numTokens: 3, window: 0 }, // uneven groups
  { numHeads: 32, numKvHeads: 8, headDim: 64, startPos: 200, numTokens: 2, window: 0 },
];
/** Requests in one batch, each with its own pages of the one pool. */
const BATCH = 2;

for (const variant of nativeVariantsHere())
  describe(`the addon's attention (${variant}) shared with two helper threads`, () => {
    beforeAll(() => {
      selectNativeVariant(variant);
      new NativeDense({ threads: 3, spinMicros: 50 }); // starts the process's helper threads
    });

    for (const dtype of ['f32', 'f16', 'q8_0'] as const)
      it(`gives the calling thread's bits on a ${dtype} pool, every shape, a batch of ${BATCH}, call after call`, async () => {
        const native = addon();
        const before = native.helperChunks();
        const rng = new Rng(7);
        for (const shape of SHAPES) {
          const { numHeads, headDim, startPos, numTokens } = shape;
          const pagesEach = Math.ceil((startPos + numTokens) / PAGE_SIZE);
          const pool = randomPool(rng, dtype, shape, BATCH * pagesEach + 1);
          // Each request's pages, interleaved and reversed through the pool.
          const tables = Array.from({ length: BATCH }, (_, b) =>
            Int32Array.from({ length: pagesEach }, (_, p) => BATCH * (pagesEach - 1 - p) + b + 1),
          );
          const qs = tables.map(() => randomF32(rng, numTokens * numHeads * headDim));
          const length = numTokens * numHeads * headDim;
          const attend = (b: number, helpers: 0 | 1): Float32Array =>
            attendPaged(native, pool, shape, tables[b]!, qs[b]!, numHeads, helpers);
          const alone = tables.map((_, b) => attend(b, 0));
          for (const out of alone) expect(out.every(Number.isFinite)).toBe(true);
          for (let round = 0; round < 4; round++)
            for (let b = 0; b < BATCH; b++)
              expectBitwiseEqual(
                `${JSON.stringify(shape)} request ${b} round ${round}`,
                attend(b, 1),
                alone[b]!,
                length,
              );
        }
        // After the helpers have gone to sleep (past their spin), they still wake and agree.
        await new Promise((resolve) => setTimeout(resolve, 10));
        expect(native.helperChunks()).toBeGreaterThan(before);
      });
  });
