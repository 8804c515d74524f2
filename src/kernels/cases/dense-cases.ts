// The shared case suite of DenseKernels: every backend runs these (see its *.test.ts), and each
// compares against RefDense, the oracle. Tolerance: |y - y_ref| <= 1e-5 * Σ_k |x_k · w_k| + 1e-12
// per element (f32 accumulation of up to ~2048 terms stays far inside it, while a wrong weight,
// nibble order or scale is off by orders of magnitude). A backend that quantizes (or rounds)
// activations exactly as llama.cpp does (the native kernels: Q8_0 for q4_0/q8_0, Q8_K for
// K-quants, x rounded to f16/bf16 for half weights) is compared instead with the reference run on
// those activations (activationsAsLlamaCpp), at the same tolerance.
// Batch-invariant backends must also give bit-identical rows whether a row is computed alone
// or inside a batch of 16.
import { Rng } from '../../core/index.js';
import { RefDense } from '../ref/dense.js';
import type { DenseKernels, WeightDType } from '../types.js';
import {
  type KernelCase,
  activationsAsLlamaCpp,
  dotMagnitudes,
  expectBitwiseEqual,
  expectThrows,
  expectWithin,
  randomF32,
  randomWeight,
  weightValues,
} from './support.js';

export const DENSE_RELATIVE_TOLERANCE = 1e-5;

const FLOAT_DTYPES: readonly WeightDType[] = ['f32', 'f16', 'bf16'];
const BLOCK_DTYPES: readonly WeightDType[] = ['q8_0', 'q4_0', 'q4_k', 'q5_k', 'q6_k'];
const K_DTYPES: readonly WeightDType[] = ['q4_k', 'q5_k', 'q6_k'];
/** [rows, cols]: odd sizes, cols not a multiple of 4 or 16 for float types. */
const FLOAT_SHAPES: readonly (readonly [number, number])[] = [
  [1, 1],
  [7, 13],
  [33, 50],
  [64, 67],
  [130, 96],
];
/** Block types need cols % 32 === 0. */
const BLOCK_SHAPES: readonly (readonly [number, number])[] = [
  [1, 32],
  [9, 32],
  [33, 96],
  [70, 160],
];
/** K-quants need cols % 256 === 0. */
const K_SHAPES: readonly (readonly [number, number])[] = [
  [1, 256],
  [9, 512],
  [33, 768],
];
const BATCH_SIZES = [1, 3, 16];

export interface DenseCaseOptions {
  /**
   * 'llama.cpp': the backend quantizes activations as llama.cpp does; the reference runs on
   * those (activationsAsLlamaCpp) and every dtype is held to DENSE_RELATIVE_TOLERANCE.
   */
  readonly activations?: 'exact' | 'llama.cpp';
}

async function expectCloseToRef(
  backend: DenseKernels,
  dtype: WeightDType,
  rows: number,
  cols: number,
  m: number,
  seed: number,
  tolerance: number,
  activations: DenseCaseOptions['activations'],
): Promise<void> {
  const rng = new Rng(seed);
  const weight = randomWeight(rng, dtype, rows, cols);
  const x = randomF32(rng, m * cols);
  const ref = new RefDense();
  const xRef = activations === 'llama.cpp' ? activationsAsLlamaCpp(dtype, x, cols) : x;
  const expected = await ref.matmul(await ref.prepare(weight), xRef, m);
  const actual = await backend.matmul(await backend.prepare(weight), x, m);
  if (actual.length !== m * rows) throw new Error(`expected ${m * rows} outputs, got ${actual.length}`);
  const magnitude = dotMagnitudes(x, m, weightValues(weight), rows, cols);
  expectWithin(
    `${dtype} [${rows}x${cols}] m=${m}`,
    actual,
    expected,
    m * rows,
    (i) => tolerance * magnitude[i]! + 1e-12,
  );
}

export function denseCases(options: DenseCaseOptions = {}): KernelCase<DenseKernels>[] {
  const cases: KernelCase<DenseKernels>[] = [];
  let seed = 100;
  for (const dtype of [...FLOAT_DTYPES, ...BLOCK_DTYPES]) {
    const shapes = FLOAT_DTYPES.includes(dtype) ? FLOAT_SHAPES : K_DTYPES.includes(dtype) ? K_SHAPES : BLOCK_SHAPES;
    for (const m of BATCH_SIZES) {
      const caseSeed = seed++;
      cases.push({
        name: `${dtype}: matches the reference for shapes ${shapes.map(([r, c]) => `${r}x${c}`).join(', ')} at m = ${m}`,
        async run(backend) {
          for (const [rows, cols] of shapes)
            await expectCloseToRef(
              backend,
              dtype,
              rows,
              cols,
              m,
              caseSeed * 31 + rows,
              DENSE_RELATIVE_TOLERANCE,
              options.activations,
            );
        },
      });
    }
  }

  cases.push({
    name: 'writes into a given out array, returns it, and leaves elements past m * rows untouched',
    async run(backend) {
      const rng = new Rng(3);
      const weight = await backend.prepare(randomWeight(rng, 'f32', 5, 40));
      const out = new Float32Array(3 * 5 + 4).fill(7);
      const y = await backend.matmul(weight, randomF32(rng, 3 * 40), 3, out);
      if (y !== out) throw new Error('matmul did not return the out array it was given');
      if (out.subarray(15).some((v) => v !== 7)) throw new Error('matmul wrote past m * rows');
      if (out.subarray(0, 15).every((v) => v === 7)) throw new Error('matmul did not write out');
    },
  });

  cases.push({
    name: 'uses only the first m rows of a longer x, and accepts weight bytes at an odd byte offset',
    async run(backend) {
      const rng = new Rng(4);
      const weight = randomWeight(rng, 'q4_0', 6, 64);
      const shifted = new Uint8Array(weight.data.byteLength + 1);
      shifted.set(weight.data, 1);
      const prepared = await backend.prepare({ ...weight, data: shifted.subarray(1) });
      const x = randomF32(rng, 4 * 64);
      const ref = new RefDense();
      const xRef = options.activations === 'llama.cpp' ? activationsAsLlamaCpp('q4_0', x, 64) : x;
      const expected = await ref.matmul(await ref.prepare(weight), xRef, 2);
      const magnitude = dotMagnitudes(x, 2, weightValues(weight), 6, 64);
      const tolerance = DENSE_RELATIVE_TOLERANCE;
      expectWithin(
        'm=2 of a 4-row x',
        await backend.matmul(prepared, x, 2),
        expected,
        12,
        (i) => tolerance * magnitude[i]! + 1e-12,
      );
    },
  });

  cases.push({
    name: 'refuses a weight whose byte size does not match its shape and dtype',
    async run(backend) {
      const weight = randomWeight(new Rng(5), 'q8_0', 4, 64);
      await expectThrows('truncated q8_0', () => backend.prepare({ ...weight, data: weight.data.subarray(1) }));
      await expectThrows('q4_0 with cols % 32 != 0', () =>
        backend.prepare({ ...weight, dtype: 'q4_0', shape: [4, 48], data: new Uint8Array(4 * 27) }),
      );
      // 2 rows of 128 are one super-block of bytes, but a K-quant row must be whole super-blocks.
      await expectThrows('q4_k with cols % 256 != 0', () =>
        backend.prepare({ ...weight, dtype: 'q4_k', shape: [2, 128], data: new Uint8Array(144) }),
      );
    },
  });
  return cases;
}

/** Rows computed alone (m = 1) equal the same rows inside a batch of 16, bit for bit. */
export function batchInvarianceCases(): KernelCase<DenseKernels>[] {
  return [...FLOAT_DTYPES, ...BLOCK_DTYPES].map((dtype, n) => ({
    name: `${dtype}: each row alone equals the same row inside a batch of 16, bit for bit`,
    async run(backend) {
      const rng = new Rng(200 + n);
      const [rows, cols] = FLOAT_DTYPES.includes(dtype) ? [37, 98] : K_DTYPES.includes(dtype) ? [37, 512] : [37, 96];
      const weight = await backend.prepare(randomWeight(rng, dtype, rows, cols));
      const x = randomF32(rng, 16 * cols);
      const batch = await backend.matmul(weight, x, 16);
      for (let i = 0; i < 16; i++) {
        const alone = await backend.matmul(weight, x.subarray(i * cols, (i + 1) * cols), 1);
        expectBitwiseEqual(`${dtype} row ${i}`, alone, batch.subarray(i * rows), rows);
        const inThree = await backend.matmul(weight, x.subarray(i * cols), Math.min(3, 16 - i));
        expectBitwiseEqual(
          `${dtype} row ${i} in a batch of ${Math.min(3, 16 - i)}`,
          inThree,
          batch.subarray(i * rows),
          rows,
        );
      }
    },
  }));
}
