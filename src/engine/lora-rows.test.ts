import { describe, expect, it } from 'vitest';
import { nativeAvailability, nativeLoraRows } from '../kernels/index.js';
import type { LoraPair } from './lora.js';
import { addLoraRows, LoraScratch, type NativeLoraRows } from './lora-rows.js';

/** A deterministic pair of odd shapes (rank 5: a remainder after the passes of four). */
function pair(halfActivations: boolean, [rank, inDim, outDim] = [5, 13, 7]): LoraPair {
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

function run(
  p: LoraPair,
  groups: readonly (readonly number[])[],
  native: NativeLoraRows | null = null,
  input = x,
  width = WIDTH,
): Float32Array {
  const y = Float32Array.from({ length: T * width }, (_, i) => i * 0.01);
  const scratch = new LoraScratch();
  for (const rows of groups) addLoraRows(p, input, rows, y, width, OFFSET, scratch, native);
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

// The addon is built wherever the tests run (npm run build; x86-64 with AVX2): no skip.
describe('addLoraRows on the native addon (kernels/native/lora.c)', () => {
  const native = nativeLoraRows();
  it('is available here', () => {
    expect(native, JSON.stringify(nativeAvailability())).not.toBeNull();
  });

  // Shapes with every remainder: rank % 4, inDim % 8 and outDim % 8 non-zero, and m100's own.
  for (const shape of [
    [5, 13, 7],
    [16, 64, 48],
    [3, 37, 29],
  ] as const)
    for (const half of [false, true])
      it(`rank ${shape[0]}, ${shape[1]} -> ${shape[2]} (${half ? 'f16' : 'f32'}): each row's bits alone or grouped, the TypeScript term's within 1e-5`, () => {
        const p = pair(half, [...shape]);
        const input = Float32Array.from({ length: T * p.inDim }, (_, i) => Math.cos(i * 0.37));
        const width = p.outDim + 5;
        const alone = run(
          p,
          Array.from({ length: T }, (_, t) => [t]),
          native,
          input,
          width,
        );
        expect(run(p, [[0, 1, 2, 3, 4, 5, 6]], native, input, width)).toEqual(alone);
        expect(
          run(
            p,
            [
              [6, 2, 4],
              [1, 0, 5, 3],
            ],
            native,
            input,
            width,
          ),
        ).toEqual(alone);
        const ts = run(p, [[0, 1, 2, 3, 4, 5, 6]], null, input, width);
        let worst = 0;
        for (let i = 0; i < ts.length; i++) worst = Math.max(worst, Math.abs(alone[i]! - ts[i]!));
        // f16: a sum on either side of a half rounding boundary moves by one half ulp (~5e-4 at 1).
        expect(worst).toBeLessThan(half ? 2e-3 : 1e-5);
        // Columns outside [OFFSET, OFFSET + outDim) untouched.
        for (let t = 0; t < T; t++)
          for (const c of [0, 1, OFFSET + p.outDim, width - 1])
            expect(alone[t * width + c]).toBe(Math.fround((t * width + c) * 0.01));
      });

  it('refuses a row index outside x or y, writing nothing', () => {
    const p = pair(false);
    const y = new Float32Array(T * WIDTH);
    expect(() => addLoraRows(p, x, [0, T], y, WIDTH, OFFSET, new LoraScratch(), native)).toThrow(RangeError);
    expect(y.every((v) => v === 0)).toBe(true);
  });
});
