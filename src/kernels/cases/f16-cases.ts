// The f16 promotion cases of OpKernels: a backend held to itself, attention over an f16 pool
// against attention over an f32 pool of the same values (each half promoted exactly), bit for
// bit, with K and V rows of edge halves: subnormals, signed zeros, the smallest normals, the
// largest half, and inf and nan. Every backend runs them beside the ops case suite.
import { Rng } from '../../core/index.js';
import { f16ToF32 } from '../half.js';
import { kvIndex } from '../layout.js';
import type { OpKernels } from '../types.js';
import { poisonedPool } from './ops-cases.js';
import { type KernelCase, randomF32 } from './support.js';

export function f16PromotionCases(): KernelCase<OpKernels>[] {
  return F16_PROMOTION_SETUPS.map((p): KernelCase<OpKernels> => ({
    name: `attention over an f16 pool equals attention over an f32 pool of the promoted values, bit for bit (${p.label})`,
    run(backend) {
      const { pageSize, numKvHeads, headDim, numHeads, positions } = p;
      const geometry = { numLayers: 2, pageSize, numKvHeads, headDim };
      const numPages = Math.ceil(positions / pageSize) + 2;
      const pageTable = Int32Array.from({ length: numPages - 2 }, (_, i) => (i * 5 + 3) % numPages);
      const kvDim = numKvHeads * headDim;
      const rng = new Rng(603 + headDim);
      const halves = f16EdgeRows(rng, positions, numKvHeads, headDim, p.nonFinite);
      const half = poisonedPool(backend, 'f16', geometry, numPages);
      const full = poisonedPool(backend, 'f32', geometry, numPages);
      if (half.dtype !== 'f16' || full.dtype !== 'f32') throw new Error('unreachable');
      for (let pos = 0; pos < positions; pos++) {
        for (const kv of [0, 1] as const) {
          const row = halves[kv].subarray(pos * kvDim, (pos + 1) * kvDim);
          const at = kvIndex(half, pageTable[Math.floor(pos / pageSize)]!, 1, kv, pos % pageSize);
          half.data.set(row, at);
          full.data.set(Float32Array.from(row, f16ToF32), at);
        }
      }
      // q: O(1), but 2^-16 where K holds the largest half, so no single score swamps the softmax.
      const q = randomF32(rng, 2 * numHeads * headDim);
      for (let i = 0; i < q.length; i++) if (i % headDim === F16_MAX_DIM) q[i] = 2 ** -16;
      const shape = { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
      // Decode at the last position, and a chunk of two that ends there.
      for (const numTokens of [1, 2]) {
        const args = { layer: 1, shape, numTokens, startPos: positions - numTokens, pageTable };
        const n = numTokens * numHeads * headDim;
        const [a, b] = [new Float32Array(n), new Float32Array(n)];
        backend.attention(half, { ...args, q: q.subarray(0, n), out: a });
        backend.attention(full, { ...args, q: q.subarray(0, n), out: b });
        const [ab, bb] = [new Uint32Array(a.buffer), new Uint32Array(b.buffer)];
        let finite = 0;
        for (let i = 0; i < n; i++) {
          if (Number.isNaN(a[i]!) && Number.isNaN(b[i]!)) continue; // NaN payloads may differ
          if (ab[i] !== bb[i])
            throw new Error(`${numTokens} token(s), output ${i}: f16 pool ${a[i]}, f32 pool ${b[i]}`);
          if (Number.isFinite(a[i]!)) finite++;
        }
        // Inf or NaN in KV head 1 only: the heads on KV head 0 stay finite (and so compared).
        if (finite < n / (p.nonFinite ? numKvHeads : 1)) throw new Error(`only ${finite} of ${n} outputs finite`);
      }
    },
  }));
}

/** The dimension of each KV head where f16EdgeRows puts the largest half (±65504) into K. */
const F16_MAX_DIM = 1;

/**
 * Geometries for the f16-vs-f32 promotion case: runs of four whole pages and single pages, rows
 * a multiple of 8 halves and not (headDim 7: tails of 4 and of 1), and inf / nan in K and V.
 */
const F16_PROMOTION_SETUPS = [
  {
    label: 'GQA 4/2, headDim 64, pageSize 4, 19 positions',
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    pageSize: 4,
    positions: 19,
    nonFinite: false,
  },
  {
    label: 'GQA 3/1, headDim 7, pageSize 3, 17 positions',
    numHeads: 3,
    numKvHeads: 1,
    headDim: 7,
    pageSize: 3,
    positions: 17,
    nonFinite: false,
  },
  {
    label: 'inf and nan in K and V of KV head 1',
    numHeads: 4,
    numKvHeads: 2,
    headDim: 16,
    pageSize: 2,
    positions: 11,
    nonFinite: true,
  },
] as const;

/**
 * K and V rows of f16 bit patterns, position by position in four classes: subnormal halves and
 * signed zeros; the smallest normals (exponents 1 to 3); values near 1; and K rows that hold
 * ±65504 (the largest half) at F16_MAX_DIM. V draws from every finite class at random. With
 * nonFinite, one position's K and another's V hold inf, -inf and nan in KV head 1's part.
 */
function f16EdgeRows(
  rng: Rng,
  positions: number,
  numKvHeads: number,
  headDim: number,
  nonFinite: boolean,
): [Uint16Array, Uint16Array] {
  const kvDim = numKvHeads * headDim;
  const sign = () => (rng.nextU32() & 1) << 15;
  const subnormal = () => sign() | (rng.nextU32() % 0x400); // includes ±0
  const tinyNormal = () => sign() | ((1 + (rng.nextU32() % 3)) << 10) | (rng.nextU32() & 0x3ff);
  const nearOne = () => sign() | ((14 + (rng.nextU32() % 2)) << 10) | (rng.nextU32() & 0x3ff);
  const classes = [subnormal, tinyNormal, nearOne];
  const k = new Uint16Array(positions * kvDim);
  const v = new Uint16Array(positions * kvDim);
  for (let pos = 0; pos < positions; pos++) {
    for (let i = 0; i < kvDim; i++) {
      k[pos * kvDim + i] = pos % 4 === 3 && i % headDim === F16_MAX_DIM ? sign() | 0x7bff : classes[pos % 3]!();
      v[pos * kvDim + i] = rng.nextU32() % 16 === 0 ? sign() | 0x7bff : classes[rng.nextU32() % 3]!();
    }
  }
  if (nonFinite) {
    k.set([0x7c00, 0xfc00, 0x7e00, 0xfd01], 5 * kvDim + headDim);
    v.set([0xfc00, 0x7e00, 0x7c00, 0x7f00], 8 * kvDim + headDim + 3);
  }
  return [k, v];
}
