import { describe, expect, it } from 'vitest';
import type { LoraPair } from './lora.js';
import { addLoraRows, LoraScratch } from './lora-rows.js';

/** A deterministic pair of odd shapes (rank 5: a remainder after the passes of four). */
function pair(halfActivations: boolean): LoraPair {
  const [rank, inDim, outDim] = [5, 13, 7];
  const value = (i: number) => Math.sin(i * 12.9898) * 0.5;
  return {
    rank,
    inDim,
    outDim,
    a: Float32Array.from({ length: rank * inDim }, (_, i) => value(i)),
    b: Float32Array.from({ length: outDim * rank }, (_, i) => value(i + 1000)),
    scale: 0.75,
    halfActivations,
  };
}

const T = 7;
const WIDTH = 10;
const OFFSET = 2;
const x = Float32Array.from({ length: T * 13 }, (_, i) => Math.cos(i * 0.37));

function run(p: LoraPair, groups: readonly (readonly number[])[]): Float32Array {
  const y = Float32Array.from({ length: T * WIDTH }, (_, i) => i * 0.01);
  const scratch = new LoraScratch();
  for (const rows of groups) addLoraRows(p, x, rows, y, WIDTH, OFFSET, scratch);
  return y;
}

describe('addLoraRows: an adapter applied to the rows that name it, grouped', () => {
  for (const half of [false, true])
    it(`gives each row bit for bit what it gets alone, however rows are grouped (${half ? 'f16' : 'f32'} adapter)`, () => {
      const p = pair(half);
      const alone = run(
        p,
        Array.from({ length: T }, (_, t) => [t]),
      );
      expect(run(p, [[0, 1, 2, 3, 4, 5, 6]])).toEqual(alone);
      expect(
        run(p, [
          [6, 2, 4],
          [1, 0, 5, 3],
        ]),
      ).toEqual(alone);
      // And what the plain definition gives, off OFFSET..OFFSET+outDim untouched.
      for (let t = 0; t < T; t++)
        for (let c = 0; c < WIDTH; c++) {
          const i = c - OFFSET;
          let want = (t * WIDTH + c) * 0.01;
          if (i >= 0 && i < p.outDim) {
            let sum = 0;
            for (let j = 0; j < p.rank; j++) {
              let ax = 0;
              for (let k = 0; k < p.inDim; k++) ax += p.a[j * p.inDim + k]! * x[t * p.inDim + k]!;
              sum += p.b[i * p.rank + j]! * ax;
            }
            want += p.scale * sum;
          }
          expect(alone[t * WIDTH + c]).toBeCloseTo(want, half ? 2 : 5);
        }
    });
});
