// OpKernels on the WebAssembly SIMD kernels. Arrays from allocF32 (views into the runtime's
// memory, like the KV pool) are used in place; any other array is copied into scratch and
// results copied back. The KV pool must be such a view: attention never copies the pool. An f16
// pool (allocU16) is written through the kernels' f32 -> f16 rounding and read by attentionF16; a
// q8_0 pool (allocU8) is written by the kernels' quantizeRowsQ8 (the bytes of q8-kv.ts, which
// every backend writes) and read by attentionQ8, which dequantizes a page at a time (the fallback
// where the native kernel is absent).
import { assert } from '../../core/index.js';
import { checkAttention, checkLengths, checkRope, checkWriteKv, kvIndex } from '../layout.js';
import { Float32Bits } from '../half.js';
import { quantizeKvRow } from '../q8-kv.js';
import type { AttentionArgs, OpKernels, PagedKvView, RopeArgs } from '../types.js';
import { WasmRuntime, type WasmRuntimeOptions } from './runtime.js';

export class WasmOps implements OpKernels {
  readonly name = 'wasm' as const;
  readonly runtime: WasmRuntime;

  constructor(runtime: WasmRuntime) {
    this.runtime = runtime;
  }

  allocF32(length: number): Float32Array {
    return this.runtime.f32(this.runtime.alloc(length * 4), length);
  }

  allocU16(length: number): Uint16Array {
    return this.runtime.u16(this.runtime.alloc(length * 2), length);
  }

  allocU8(length: number): Uint8Array {
    return this.runtime.u8(this.runtime.alloc(length), length);
  }

  rmsNorm(x: Float32Array, weight: Float32Array, eps: number, m: number, dim: number, out: Float32Array): void {
    const n = m * dim;
    checkLengths('rmsNorm', n, x, out);
    checkLengths('rmsNorm weight', dim, weight);
    const rt = this.runtime;
    const xp = rt.input('a', x, n);
    const wp = rt.input('b', weight, dim);
    const op = rt.owns(out) ? out.byteOffset : x === out ? xp : rt.scratch('c', n * 4);
    rt.kernels.rmsNorm(xp, wp, eps, m, dim, op);
    rt.output(op, out, n);
  }

  rope(args: RopeArgs): void {
    checkRope(args);
    const { x, numTokens, numHeads, headDim } = args;
    const rt = this.runtime;
    const n = numTokens * numHeads * headDim;
    const xp = rt.input('a', x, n);
    const positions = rt.input('b', args.positions, numTokens);
    const invFreq = rt.input('c', args.invFreq, headDim / 2);
    rt.kernels.rope(
      xp,
      numTokens,
      numHeads,
      headDim,
      positions,
      invFreq,
      args.attentionFactor,
      rt.scratch('d', headDim * 4),
    );
    rt.output(xp, x, n);
  }

  siluMul(gate: Float32Array, up: Float32Array, out: Float32Array, n: number): void {
    checkLengths('siluMul', n, gate, up, out);
    const rt = this.runtime;
    const gp = rt.input('a', gate, n);
    const up_ = rt.input('b', up, n);
    const op = rt.owns(out) ? out.byteOffset : rt.scratch('c', n * 4);
    rt.kernels.siluMul(gp, up_, op, n);
    rt.output(op, out, n);
  }

  geluTanhMul(gate: Float32Array, up: Float32Array, out: Float32Array, n: number): void {
    checkLengths('geluTanhMul', n, gate, up, out);
    const rt = this.runtime;
    const gp = rt.input('a', gate, n);
    const up_ = rt.input('b', up, n);
    const op = rt.owns(out) ? out.byteOffset : rt.scratch('c', n * 4);
    rt.kernels.geluTanhMul(gp, up_, op, n);
    rt.output(op, out, n);
  }

  addInPlace(x: Float32Array, y: Float32Array, n: number): void {
    checkLengths('addInPlace', n, x, y);
    const rt = this.runtime;
    const xp = rt.input('a', x, n);
    rt.kernels.addInPlace(xp, rt.input('b', y, n), n);
    rt.output(xp, x, n);
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
    if (kv.dtype === 'f16') {
      this.#writeKvF16(kv, layer, pageTable, startPos, numTokens, k, v);
      return;
    }
    if (kv.dtype === 'q8_0') {
      this.#writeKvQ8(kv, layer, pageTable, startPos, numTokens, k, v);
      return;
    }
    // A row copy per token: memcpy speed already, no wasm call needed.
    for (let t = 0; t < numTokens; t++) {
      const pos = startPos + t;
      const page = pageTable[Math.floor(pos / kv.pageSize)]!;
      const slot = pos % kv.pageSize;
      kv.data.set(k.subarray(t * kvDim, (t + 1) * kvDim), kvIndex(kv, page, layer, 0, slot));
      kv.data.set(v.subarray(t * kvDim, (t + 1) * kvDim), kvIndex(kv, page, layer, 1, slot));
    }
  }

  /**
   * Quantizes each row in the kernels (kv-q8.ts: q8-kv.ts's bytes, ~10x faster than it), straight
   * into its slot; a pool outside this runtime's memory is written by q8-kv.ts itself.
   */
  #writeKvQ8(
    kv: PagedKvView & { readonly dtype: 'q8_0' },
    layer: number,
    pageTable: Int32Array,
    startPos: number,
    numTokens: number,
    k: Float32Array,
    v: Float32Array,
  ): void {
    const rt = this.runtime;
    const kvDim = kv.numKvHeads * kv.headDim;
    if (!rt.owns(kv.data)) {
      const bits = new Float32Bits();
      for (let t = 0; t < numTokens; t++) {
        const pos = startPos + t;
        const page = pageTable[Math.floor(pos / kv.pageSize)]!;
        const slot = pos % kv.pageSize;
        quantizeKvRow(k, t * kvDim, kv.numKvHeads, kv.headDim, kv.data, kvIndex(kv, page, layer, 0, slot), bits);
        quantizeKvRow(v, t * kvDim, kv.numKvHeads, kv.headDim, kv.data, kvIndex(kv, page, layer, 1, slot), bits);
      }
      return;
    }
    const kp = rt.input('a', k, numTokens * kvDim);
    const vp = rt.input('b', v, numTokens * kvDim);
    const base = kv.data.byteOffset;
    for (let t = 0; t < numTokens; t++) {
      const pos = startPos + t;
      const page = pageTable[Math.floor(pos / kv.pageSize)]!;
      const slot = pos % kv.pageSize;
      rt.kernels.quantizeRowsQ8(
        kp + t * kvDim * 4,
        kv.numKvHeads,
        kv.headDim,
        base + kvIndex(kv, page, layer, 0, slot),
      );
      rt.kernels.quantizeRowsQ8(
        vp + t * kvDim * 4,
        kv.numKvHeads,
        kv.headDim,
        base + kvIndex(kv, page, layer, 1, slot),
      );
    }
  }

  /** Rounds each row to f16 in the kernels, straight into its slot (the pool is wasm memory). */
  #writeKvF16(
    kv: PagedKvView & { readonly dtype: 'f16' },
    layer: number,
    pageTable: Int32Array,
    startPos: number,
    numTokens: number,
    k: Float32Array,
    v: Float32Array,
  ): void {
    const rt = this.runtime;
    assert(rt.owns(kv.data), 'WasmOps.writeKv: an f16 KV pool must be allocated with allocU16 of the same runtime');
    const kvDim = kv.numKvHeads * kv.headDim;
    const kp = rt.input('a', k, numTokens * kvDim);
    const vp = rt.input('b', v, numTokens * kvDim);
    const base = kv.data.byteOffset;
    for (let t = 0; t < numTokens; t++) {
      const pos = startPos + t;
      const page = pageTable[Math.floor(pos / kv.pageSize)]!;
      const slot = pos % kv.pageSize;
      rt.kernels.f32ToF16Row(kp + t * kvDim * 4, base + kvIndex(kv, page, layer, 0, slot) * 2, kvDim);
      rt.kernels.f32ToF16Row(vp + t * kvDim * 4, base + kvIndex(kv, page, layer, 1, slot) * 2, kvDim);
    }
  }

  attention(kv: PagedKvView, args: AttentionArgs): void {
    checkAttention(kv, args);
    const rt = this.runtime;
    assert(
      rt.owns(kv.data),
      'WasmOps.attention: the KV pool must be allocated with allocF32 (f16: allocU16, q8_0: allocU8) of the same runtime',
    );
    const { numTokens, startPos, shape } = args;
    const endPos = startPos + numTokens;
    const n = numTokens * shape.numHeads * shape.headDim;
    const qp = rt.input('a', args.q, n);
    const op = rt.owns(args.out) ? args.out.byteOffset : rt.scratch('c', n * 4);
    const pageTable = rt.input('b', args.pageTable, Math.ceil(endPos / kv.pageSize));
    // One stretch of scores per query head, its last float for 1 / sum.
    const stride = Math.ceil((endPos + 5) / 4) * 4;
    const scores = rt.scratch('d', shape.numHeads * stride * 4);
    const sinks = args.sinks === undefined ? 0 : rt.input('f', args.sinks, shape.numHeads);
    if (kv.dtype === 'q8_0' || kv.dtype === 'f16') {
      // rows: the K (or V) rows turned to f32 before the sums: one page of dequantized q8_0 rows,
      // or four pages of promoted f16 planes. The rows scratch starts 1088 bytes into its region:
      // with it 64-byte aligned like the pool, the kernel's stores into it and its loads from the
      // pool share low address bits (4 KiB aliasing is the likely cause; measured ~2x on austen's
      // f16 pool).
      const q8 = kv.dtype === 'q8_0';
      const rowsBytes = (q8 ? 1 : 4) * kv.pageSize * kv.numKvHeads * kv.headDim * 4 + 4096;
      (q8 ? rt.kernels.attentionQ8 : rt.kernels.attentionF16)(
        kv.data.byteOffset,
        kv.numLayers,
        kv.pageSize,
        kv.numKvHeads,
        kv.headDim,
        args.layer,
        pageTable,
        qp,
        op,
        numTokens,
        startPos,
        shape.numHeads,
        shape.scale,
        scores,
        stride,
        rt.scratch('e', rowsBytes) + 1088,
        args.window ?? 0,
        sinks,
      );
    } else {
      rt.kernels.attention(
        kv.data.byteOffset,
        kv.numLayers,
        kv.pageSize,
        kv.numKvHeads,
        kv.headDim,
        args.layer,
        pageTable,
        qp,
        op,
        numTokens,
        startPos,
        shape.numHeads,
        shape.scale,
        scores,
        stride,
        args.window ?? 0,
        sinks,
      );
    }
    rt.output(op, args.out, n);
  }
}

export async function createWasmOps(options: WasmRuntimeOptions & { runtime?: WasmRuntime } = {}): Promise<WasmOps> {
  return new WasmOps(options.runtime ?? (await WasmRuntime.load(options)));
}
