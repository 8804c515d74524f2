// The row ops' part of OpKernels' shared case suite (ops-cases.ts runs it first): RMSNorm, RoPE,
// SiLU·mul, GELU·mul and add, against RefOps, on plain arrays and on the backend's own allocF32
// views. Row ops read no KV pool, so nothing here is poisoned; tolerances as ops-cases.ts says:
// |y - y_ref| <= 1e-5 * (|y_ref| + 1) for RoPE, 1e-5 * |y_ref| + 1e-6 for the rest; add is exact.
import { Rng } from '../../core/index.js';
import { RefOps } from '../ref/ops.js';
import type { OpKernels } from '../types.js';
import { type KernelCase, expectBitwiseEqual, expectWithin, randomF32 } from './support.js';

export const OPS_RELATIVE_TOLERANCE = 1e-5;

export function rowCases(): KernelCase<OpKernels>[] {
  const rng = new Rng(500);
  return [
    {
      name: 'rmsNorm matches the reference for dims 1, 7, 64, 768 and m = 1, 3, also in place',
      run(backend) {
        for (const dim of [1, 7, 64, 768]) {
          for (const m of [1, 3]) {
            const x = randomF32(rng, m * dim, 3);
            const weight = randomF32(rng, dim);
            const expected = new Float32Array(m * dim);
            new RefOps().rmsNorm(x, weight, 1e-5, m, dim, expected);
            const out = new Float32Array(m * dim);
            backend.rmsNorm(x, weight, 1e-5, m, dim, out);
            expectWithin(
              `rmsNorm ${m}x${dim}`,
              out,
              expected,
              m * dim,
              (i) => OPS_RELATIVE_TOLERANCE * Math.abs(expected[i]!) + 1e-6,
            );
            const inPlace = x.slice();
            backend.rmsNorm(inPlace, weight, 1e-5, m, dim, inPlace);
            expectBitwiseEqual(`rmsNorm ${m}x${dim} in place`, inPlace, out, m * dim);
          }
        }
      },
    },
    {
      name: 'rmsNorm: a row alone equals the same row inside a batch, bit for bit',
      run(backend) {
        const dim = 67;
        const x = randomF32(rng, 5 * dim);
        const weight = randomF32(rng, dim);
        const batch = new Float32Array(5 * dim);
        backend.rmsNorm(x, weight, 1e-6, 5, dim, batch);
        for (let r = 0; r < 5; r++) {
          const alone = new Float32Array(dim);
          backend.rmsNorm(x.subarray(r * dim), weight, 1e-6, 1, dim, alone);
          expectBitwiseEqual(`row ${r}`, alone, batch.subarray(r * dim), dim);
        }
      },
    },
    {
      name: 'rope matches the reference for headDim 2, 6, 64, 128, far positions and an attention factor',
      run(backend) {
        for (const [headDim, theta, factor] of [
          [2, 10000, 1],
          [6, 10000, 1],
          [64, 10000, 1],
          [128, 500000, 0.8],
        ] as const) {
          const numTokens = 3;
          const numHeads = 4;
          const x = randomF32(rng, numTokens * numHeads * headDim);
          const positions = Int32Array.from([0, 1 + rng.int(100), 4000 + rng.int(4000)]);
          const invFreq = Float32Array.from({ length: headDim / 2 }, (_, i) => theta ** ((-2 * i) / headDim));
          const expected = x.slice();
          new RefOps().rope({ x: expected, numTokens, numHeads, headDim, positions, invFreq, attentionFactor: factor });
          const actual = x.slice();
          backend.rope({ x: actual, numTokens, numHeads, headDim, positions, invFreq, attentionFactor: factor });
          expectWithin(
            `rope headDim ${headDim}`,
            actual,
            expected,
            x.length,
            (i) => OPS_RELATIVE_TOLERANCE * (Math.abs(expected[i]!) + 1),
          );
        }
      },
    },
    // The two gated activations: the same inputs, saturated ones among them, for each.
    ...(['siluMul', 'geluTanhMul'] as const).map((op): KernelCase<OpKernels> => ({
      name: `${op} matches the reference, including saturated inputs`,
      run(backend) {
        for (const n of [1, 7, 1000]) {
          const gate = randomF32(rng, n, 5);
          gate.set([-100, 100, -20, 20, 0, -0.5, 3].slice(0, n));
          const up = randomF32(rng, n);
          const expected = new Float32Array(n);
          new RefOps()[op](gate, up, expected, n);
          const out = new Float32Array(n);
          backend[op](gate, up, out, n);
          expectWithin(`${op} n=${n}`, out, expected, n, (i) => OPS_RELATIVE_TOLERANCE * Math.abs(expected[i]!) + 1e-6);
        }
      },
    })),
    {
      name: 'addInPlace adds exactly',
      run(backend) {
        for (const n of [1, 5, 771]) {
          const x = randomF32(rng, n);
          const y = randomF32(rng, n);
          const expected = x.map((v, i) => v + y[i]!);
          backend.addInPlace(x, y, n);
          expectBitwiseEqual(`add n=${n}`, x, expected, n);
        }
      },
    },
    {
      name: 'gives the same bits for inputs from allocF32 as for plain arrays',
      run(backend) {
        const dim = 50;
        const x = randomF32(rng, 2 * dim);
        const weight = randomF32(rng, dim);
        const plain = new Float32Array(2 * dim);
        backend.rmsNorm(x, weight, 1e-5, 2, dim, plain);
        const [xv, wv, ov] = [backend.allocF32(2 * dim), backend.allocF32(dim), backend.allocF32(2 * dim)];
        xv.set(x);
        wv.set(weight);
        backend.rmsNorm(xv, wv, 1e-5, 2, dim, ov);
        expectBitwiseEqual('rmsNorm on views', ov, plain, 2 * dim);
        const gate = backend.allocF32(2 * dim);
        gate.set(x);
        backend.siluMul(gate, xv, gate, 2 * dim);
        const expected = new Float32Array(2 * dim);
        backend.siluMul(x, x, expected, 2 * dim);
        expectBitwiseEqual('siluMul in place on views', gate, expected, 2 * dim);
      },
    },
  ];
}
