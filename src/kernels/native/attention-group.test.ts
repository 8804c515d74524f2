// The AVX-512 attention takes a KV head's whole group of query heads at once (attention-avx512.c's
// attendGroupAvx512: each K / V row loaded once for the group, sixteen dot products reduced
// together). Its promise: every head's output is bit for bit what the one-head path
// (oneHead, taken when a KV head has a single query head) gives. Checked by running each head of
// a GQA call again as a call of its own with one query head per KV head (numHeads = numKvHeads:
// the one-head path) and comparing the bits, on f32 / f16 / q8_0 pools, group sizes 2 to 8 (one
// uneven; each size the kernel fixes as a constant for head sizes 64 and 128), head sizes that
// are not multiples of 16, contexts ending mid-page, a window, prefill chunks and decode steps;
// several KV heads a call, so that the kernel's runs of KV heads (walked page by page) are taken.
import { describe, it } from 'vitest';
import { Rng } from '../../core/index.js';
import { expectBitwiseEqual, randomF32 } from '../cases/support.js';
import { addon, attendPaged, PAGE_SIZE, randomPool, type AttentionShape as Shape } from './attention-pools.js';
import { nativeVariantsHere, selectNativeVariant } from './native.js';

const SHAPES: readonly Shape[] = [
  { numHeads: 12, numKvHeads: 4, headDim: 64, startPos: 517, numTokens: 1, window: 0 }, // m100's decode
  { numHeads: 12, numKvHeads: 4, headDim: 64, startPos: 40, numTokens: 70, window: 0 }, // a prefill chunk
  { numHeads: 8, numKvHeads: 1, headDim: 80, startPos: 0, numTokens: 45, window: 0 }, // MQA, 8 heads
  { numHeads: 5, numKvHeads: 2, headDim: 128, startPos: 300, numTokens: 3, window: 0 }, // uneven groups
  { numHeads: 32, numKvHeads: 8, headDim: 64, startPos: 200, numTokens: 2, window: 0 }, // the 1B's
  { numHeads: 6, numKvHeads: 3, headDim: 40, startPos: 90, numTokens: 9, window: 33 }, // a window, hd 40
  { numHeads: 6, numKvHeads: 2, headDim: 96, startPos: 15, numTokens: 18, window: 0 },
  // attention-avx512.c's fixed shapes (head size 64 or 128 and the group size as constants, the
  // values pass's accumulators in registers): every group size it fixes, a context ending mid-page.
  { numHeads: 16, numKvHeads: 8, headDim: 64, startPos: 37, numTokens: 1, window: 0 }, // 64 x 2
  { numHeads: 48, numKvHeads: 8, headDim: 64, startPos: 50, numTokens: 2, window: 0 }, // 64 x 6
  { numHeads: 64, numKvHeads: 8, headDim: 64, startPos: 29, numTokens: 1, window: 0 }, // 64 x 8
  { numHeads: 32, numKvHeads: 8, headDim: 128, startPos: 45, numTokens: 1, window: 0 }, // 128 x 4
  { numHeads: 32, numKvHeads: 4, headDim: 128, startPos: 19, numTokens: 2, window: 0 }, // 128 x 8
];
/** The query heads of KV head kvh, [h0, h1), as attention.h's groupHeads. */
function groupOf(shape: Shape, kvh: number): [number, number] {
  const { numHeads: H, numKvHeads: K } = shape;
  return [Math.ceil((kvh * H) / K), Math.ceil(((kvh + 1) * H) / K)];
}

for (const variant of nativeVariantsHere().filter((v) => v === 'avx512'))
  describe(`the addon's grouped attention (${variant})`, () => {
    for (const dtype of ['f32', 'f16', 'q8_0'] as const)
      it(`gives each head the one-head path's bits on a ${dtype} pool, every shape`, () => {
        selectNativeVariant(variant);
        const native = addon();
        const rng = new Rng(11);
        for (const shape of SHAPES) {
          const { numHeads, numKvHeads, headDim, startPos, numTokens } = shape;
          const pages = Math.ceil((startPos + numTokens) / PAGE_SIZE);
          const pool = randomPool(rng, dtype, shape, pages + 1);
          const table = Int32Array.from({ length: pages }, (_, p) => pages - p); // reversed, page 0 unused
          const q = randomF32(rng, numTokens * numHeads * headDim);
          const attend = (query: Float32Array, heads: number): Float32Array =>
            attendPaged(native, pool, shape, table, query, heads, 0);
          const grouped = attend(q, numHeads);
          const largest = Math.ceil(numHeads / numKvHeads);
          for (let g = 0; g < largest; g++) {
            // Head h0 + g of every group (or the group's first, where it has fewer), one per KV head.
            const pick = (t: number, kvh: number) => {
              const [h0, h1] = groupOf(shape, kvh);
              return Math.min(h0 + g, h1 - 1) + t * numHeads;
            };
            const single = new Float32Array(numTokens * numKvHeads * headDim);
            for (let t = 0; t < numTokens; t++)
              for (let kvh = 0; kvh < numKvHeads; kvh++)
                single.set(
                  q.subarray(pick(t, kvh) * headDim, (pick(t, kvh) + 1) * headDim),
                  (t * numKvHeads + kvh) * headDim,
                );
            const alone = attend(single, numKvHeads);
            const expected = new Float32Array(alone.length);
            for (let t = 0; t < numTokens; t++)
              for (let kvh = 0; kvh < numKvHeads; kvh++)
                expected.set(
                  grouped.subarray(pick(t, kvh) * headDim, (pick(t, kvh) + 1) * headDim),
                  (t * numKvHeads + kvh) * headDim,
                );
            expectBitwiseEqual(
              `${dtype} ${JSON.stringify(shape)} head ${g} of each group`,
              alone,
              expected,
              alone.length,
            );
          }
        }
      });
  });
