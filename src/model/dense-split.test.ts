import { describe, expect, it } from 'vitest';
import { InvariantError } from '../core/index.js';
import { createRefDense, quantize, type DenseKernels, type DenseWeight, type HostTensor } from '../kernels/index.js';
import { BatchSplitDense, SizeSplitDense } from './dense-split.js';

/** A reference backend that records which weights it prepared and ran. */
function spy(): DenseKernels & { prepared: string[]; ran: number } {
  const inner = createRefDense();
  const names = new Map<DenseWeight, string>();
  const s = {
    name: inner.name,
    batchInvariant: inner.batchInvariant,
    prepared: [] as string[],
    ran: 0,
    async prepare(w: HostTensor) {
      const p = await inner.prepare(w);
      names.set(p, w.name);
      s.prepared.push(w.name);
      return p;
    },
    matmul(w: DenseWeight, x: Float32Array, m: number, out?: Float32Array) {
      s.ran++;
      return inner.matmul(w, x, m, out);
    },
    dispose: () => inner.dispose(),
  };
  return s;
}

const weight = (name: string, rows: number, cols: number, dtype: 'f32' | 'q4_0' = 'f32'): HostTensor => ({
  name,
  dtype,
  shape: [rows, cols],
  data: quantize(
    dtype,
    Float32Array.from({ length: rows * cols }, (_, i) => (i % 7) - 3),
  ),
});

describe('SizeSplitDense', () => {
  it('sends weights up to the limit (in stored bytes) to the small backend, the rest to the large one, and runs each where it was prepared', async () => {
    const [small, large] = [spy(), spy()];
    const split = new SizeSplitDense(small, large, 4096);
    const a = await split.prepare(weight('a', 32, 32)); // 4096 bytes of f32: small
    const b = await split.prepare(weight('b', 32, 64)); // 8192 bytes: large
    const c = await split.prepare(weight('c', 64, 64, 'q4_0')); // 2304 bytes of q4_0: small
    expect([small.prepared, large.prepared]).toEqual([['a', 'c'], ['b']]);
    const y = await split.matmul(b, new Float32Array(64).fill(1), 1);
    expect([small.ran, large.ran]).toEqual([0, 1]);
    expect(y).toEqual(await large.matmul(b, new Float32Array(64).fill(1), 1));
    await split.matmul(a, new Float32Array(32), 1);
    await split.matmul(c, new Float32Array(64), 1);
    expect(small.ran).toBe(2);
  });

  it('refuses a weight it did not prepare', async () => {
    const other = await createRefDense().prepare(weight('x', 4, 4));
    await expect(async () => new SizeSplitDense(spy(), spy(), 1).matmul(other, new Float32Array(4), 1)).rejects.toThrow(
      InvariantError,
    );
  });
});

describe('BatchSplitDense', () => {
  it('runs batches up to the dtype limit on the small backend and larger ones on the large one, preparing on both only where the small one is used', async () => {
    const [small, large] = [spy(), spy()];
    const split = new BatchSplitDense(small, large, (dtype) => (dtype === 'f32' ? 0 : 4));
    const q = await split.prepare(weight('q', 8, 64, 'q4_0'));
    const f = await split.prepare(weight('f', 8, 64));
    expect([small.prepared, large.prepared]).toEqual([['q'], ['q', 'f']]);
    const x = new Float32Array(5 * 64).fill(0.5);
    const decode = await split.matmul(q, x, 4);
    expect([small.ran, large.ran]).toEqual([1, 0]);
    const prefill = await split.matmul(q, x, 5);
    expect([small.ran, large.ran]).toEqual([1, 1]);
    expect(prefill.subarray(0, 4 * 8)).toEqual(decode); // both are the reference here
    await split.matmul(f, x, 1); // f32: never on the small backend
    expect([small.ran, large.ran]).toEqual([1, 2]);
  });

  it('keeps a dtype whose every batch runs on the small backend (Infinity) there alone: never prepared on the large one', async () => {
    const [small, large] = [spy(), spy()];
    const split = new BatchSplitDense(small, large, (dtype) => (dtype === 'f32' ? Infinity : 4));
    const f = await split.prepare(weight('f', 8, 64));
    const q = await split.prepare(weight('q', 8, 64, 'q4_0'));
    expect([small.prepared, large.prepared]).toEqual([['f', 'q'], ['q']]);
    expect([f.rows, f.cols, f.dtype]).toEqual([8, 64, 'f32']);
    const x = new Float32Array(300 * 64).fill(0.25);
    await split.matmul(f, x, 1);
    await split.matmul(f, x, 300);
    expect([small.ran, large.ran]).toEqual([2, 0]);
    await split.matmul(q, x, 5);
    expect([small.ran, large.ran]).toEqual([2, 1]);
  });

  it('refuses a weight it did not prepare', async () => {
    const other = await createRefDense().prepare(weight('x', 4, 4));
    await expect(async () =>
      new BatchSplitDense(spy(), spy(), () => 4).matmul(other, new Float32Array(4), 1),
    ).rejects.toThrow(InvariantError);
  });
});
