// The reference operator kernels in plain TypeScript: RMSNorm, RoPE (rotate-half pairing),
// SiLU·mul, GELU·mul, residual add, KV writes into pages and paged causal attention with GQA
// (optionally over a sliding window). The oracle
// for every fast OpKernels backend: sums in f64, results rounded to f32 once. Reads the KV pool
// only through the page table it is given, and never checks ownership (the caller did). An f16
// pool: writes round to the nearest half (half.ts), reads promote it exactly. A q8_0 pool: writes
// quantize each head's blocks (q8-kv.ts), reads are d * qs exactly.

import { f16ToF32, f32ToF16, Float32Bits } from '../half.js';
import { checkAttention, checkLengths, checkRope, checkWriteKv, kvIndex } from '../layout.js';
import { q8KvValue, quantizeKvRow } from '../q8-kv.js';
import type { AttentionArgs, OpKernels, PagedKvView, RopeArgs } from '../types.js';

export class RefOps implements OpKernels {
  readonly name = 'ref' as const;

  allocF32(length: number): Float32Array {
    return new Float32Array(length);
  }

  allocU16(length: number): Uint16Array {
    return new Uint16Array(length);
  }

  allocU8(length: number): Uint8Array {
    return new Uint8Array(length);
  }

  rmsNorm(x: Float32Array, weight: Float32Array, eps: number, m: number, dim: number, out: Float32Array): void {
    checkLengths('rmsNorm', m * dim, x, out);
    checkLengths('rmsNorm weight', dim, weight);
    for (let r = 0; r < m; r++) {
      let sumSquares = 0;
      for (let i = 0; i < dim; i++) sumSquares += x[r * dim + i]! ** 2;
      const scale = 1 / Math.sqrt(sumSquares / dim + eps);
      for (let i = 0; i < dim; i++) out[r * dim + i] = x[r * dim + i]! * scale * weight[i]!;
    }
  }

  rope(args: RopeArgs): void {
    checkRope(args);
    const { x, numTokens, numHeads, headDim, positions, invFreq, attentionFactor } = args;
    const half = headDim / 2;
    for (let t = 0; t < numTokens; t++) {
      for (let i = 0; i < half; i++) {
        // The angle is an f32 product, as in Hugging Face's rotary embedding.
        const angle = Math.fround(positions[t]! * invFreq[i]!);
        const cos = Math.cos(angle) * attentionFactor;
        const sin = Math.sin(angle) * attentionFactor;
        for (let h = 0; h < numHeads; h++) {
          const at = (t * numHeads + h) * headDim + i;
          const x0 = x[at]!;
          const x1 = x[at + half]!;
          x[at] = x0 * cos - x1 * sin;
          x[at + half] = x1 * cos + x0 * sin;
        }
      }
    }
  }

  siluMul(gate: Float32Array, up: Float32Array, out: Float32Array, n: number): void {
    checkLengths('siluMul', n, gate, up, out);
    for (let i = 0; i < n; i++) {
      const g = gate[i]!;
      out[i] = (g / (1 + Math.exp(-g))) * up[i]!;
    }
  }

  geluTanhMul(gate: Float32Array, up: Float32Array, out: Float32Array, n: number): void {
    checkLengths('geluTanhMul', n, gate, up, out);
    const c = Math.sqrt(2 / Math.PI);
    for (let i = 0; i < n; i++) {
      const g = gate[i]!;
      out[i] = 0.5 * g * (1 + Math.tanh(c * (g + 0.044715 * g * g * g))) * up[i]!;
    }
  }

  addInPlace(x: Float32Array, y: Float32Array, n: number): void {
    checkLengths('addInPlace', n, x, y);
    for (let i = 0; i < n; i++) x[i] = x[i]! + y[i]!;
  }

  writeKv(
    kv: PagedKvView,
    layer: number,
    pageTable: Int32Array,
    startPos: number,
    numTokens: number,
    k: Float32Array,
    v: Float32Array,
  ): void {
    checkWriteKv(kv, layer, pageTable, startPos, numTokens, k, v);
    const kvDim = kv.numKvHeads * kv.headDim;
    const bits = new Float32Bits();
    if (kv.dtype === 'q8_0') {
      for (let t = 0; t < numTokens; t++) {
        const pos = startPos + t;
        const page = pageTable[Math.floor(pos / kv.pageSize)]!;
        const slot = pos % kv.pageSize;
        quantizeKvRow(k, t * kvDim, kv.numKvHeads, kv.headDim, kv.data, kvIndex(kv, page, layer, 0, slot), bits);
        quantizeKvRow(v, t * kvDim, kv.numKvHeads, kv.headDim, kv.data, kvIndex(kv, page, layer, 1, slot), bits);
      }
      return;
    }
    const store = kv.dtype === 'f16' ? (x: number) => f32ToF16(x, bits) : (x: number) => x;
    for (let t = 0; t < numTokens; t++) {
      const pos = startPos + t;
      const page = pageTable[Math.floor(pos / kv.pageSize)]!;
      const slot = pos % kv.pageSize;
      for (let i = 0; i < kvDim; i++) {
        kv.data[kvIndex(kv, page, layer, 0, slot) + i] = store(k[t * kvDim + i]!);
        kv.data[kvIndex(kv, page, layer, 1, slot) + i] = store(v[t * kvDim + i]!);
      }
    }
  }

  attention(kv: PagedKvView, args: AttentionArgs): void {
    checkAttention(kv, args);
    const { layer, q, out, numTokens, startPos, pageTable } = args;
    const { numHeads, numKvHeads, headDim, scale } = args.shape;
    const scores = new Float64Array(startPos + numTokens);
    // Value i of KV head kvHead in the row at rowAt.
    const at =
      kv.dtype === 'q8_0'
        ? (rowAt: number, kvHead: number, i: number) => q8KvValue(kv.data, rowAt, headDim, kvHead, i)
        : kv.dtype === 'f16'
          ? (rowAt: number, kvHead: number, i: number) => f16ToF32(kv.data[rowAt + kvHead * headDim + i]!)
          : (rowAt: number, kvHead: number, i: number) => kv.data[rowAt + kvHead * headDim + i]!;
    for (let t = 0; t < numTokens; t++) {
      const numPositions = startPos + t + 1; // causal: positions [0, startPos + t]
      const first = args.window === undefined ? 0 : Math.max(0, numPositions - args.window); // sliding window
      for (let h = 0; h < numHeads; h++) {
        const kvHead = Math.floor((h * numKvHeads) / numHeads);
        const qAt = (t * numHeads + h) * headDim;
        let max = -Infinity;
        for (let p = first; p < numPositions; p++) {
          const kAt = kvIndex(kv, pageTable[Math.floor(p / kv.pageSize)]!, layer, 0, p % kv.pageSize);
          let dot = 0;
          for (let i = 0; i < headDim; i++) dot += q[qAt + i]! * at(kAt, kvHead, i);
          scores[p] = dot * scale;
          max = Math.max(max, scores[p]!);
        }
        const sink = args.sinks?.[h];
        if (sink !== undefined) max = Math.max(max, sink);
        let sum = sink === undefined ? 0 : Math.exp(sink - max); // the sink: in the denominator, no value
        for (let p = first; p < numPositions; p++) {
          scores[p] = Math.exp(scores[p]! - max);
          sum += scores[p]!;
        }
        for (let i = 0; i < headDim; i++) {
          let acc = 0;
          for (let p = first; p < numPositions; p++) {
            const vAt = kvIndex(kv, pageTable[Math.floor(p / kv.pageSize)]!, layer, 1, p % kv.pageSize);
            acc += scores[p]! * at(vAt, kvHead, i);
          }
          out[qAt + i] = acc / sum;
        }
      }
    }
  }
}

export function createRefOps(): OpKernels {
  return new RefOps();
}
