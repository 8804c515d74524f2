// The addon's argmax (argmax.c) gives the index one scan in index order gives: the lowest index
// of the largest value, NaN never chosen, -1 when nothing is above -infinity; over every length
// mod its 16 lanes, ties across lanes and in the tail, and a vocabulary-sized row.
import { describe, expect, it } from 'vitest';
import { Rng } from '../../core/index.js';
import { nativeArgmax } from './native.js';

const scan = (xs: Float32Array): number => {
  let best = -1;
  for (let i = 0; i < xs.length; i++) if (xs[i]! > (best < 0 ? -Infinity : xs[best]!)) best = i;
  return best;
};

describe("the addon's argmax", () => {
  const argmax = nativeArgmax();
  it('loads wherever the addon does', () => expect(argmax).not.toBeNull());

  it('gives the id one scan gives, over lengths 0 to 80, ties in any lane and the tail, NaN, infinities', () => {
    const rng = new Rng(5);
    const pool = [NaN, -Infinity, Infinity, 0, 1, 2, 3];
    for (let trial = 0; trial < 4000; trial++) {
      // Few distinct values, so the largest is often tied across lanes.
      const xs = Float32Array.from({ length: trial % 81 }, () => pool[rng.int(pool.length)]!);
      expect(argmax!(xs), `${Array.from(xs).join(',')}`).toBe(scan(xs));
    }
    expect(argmax!(new Float32Array(40).fill(Number.NaN))).toBe(-1);
    expect(argmax!(new Float32Array(40).fill(-Infinity))).toBe(-1);
  });

  it('on vocabulary-sized rows, the largest value anywhere, tied or not', () => {
    const rng = new Rng(6);
    for (let trial = 0; trial < 40; trial++) {
      const xs = Float32Array.from({ length: 32000 + (trial % 17) }, () => rng.int(1 << 20) / 1024 - 512);
      const at = rng.int(xs.length);
      xs[at] = 600;
      if (trial % 2 === 1) xs[rng.int(xs.length)] = 600; // a tie, before or after
      expect(argmax!(xs)).toBe(scan(xs));
    }
  });

  it('refuses anything but a Float32Array', () => {
    expect(() => argmax!(new Float64Array(4) as unknown as Float32Array)).toThrow(/bad arguments/);
  });
});
