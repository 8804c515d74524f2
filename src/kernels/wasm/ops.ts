// OpKernels on the WebAssembly SIMD kernels. Arrays from allocF32 (views into the runtime's
// memory, like the KV pool) are used in place; any other array is copied into scratch and
// results copied back. The KV pool must be such a view: attention never copies the pool.
import { assert } from '../../core/index.js';
import { checkAttention, checkLengths, checkRope, checkWriteKv, kvIndex } from '../layout.js';
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
    // A row copy per token: memcpy speed already, no wasm call needed.
    const kvDim = kv.numKvHeads * kv.headDim;
    for (let t = 0; t < numTokens; t++) {
      const pos = startPos + t;
      const page = pageTable[Math.floor(pos / kv.pageSize)]!;
      const slot = pos % kv.pageSize;
      kv.data.set(k.subarray(t * kvDim, (t + 1) * kvDim), kvIndex(kv, page, layer, 0, slot));
      kv.data.set(v.subarray(t * kvDim, (t + 1) * kvDim), kvIndex(kv, page, layer, 1, slot));
    }
  }

  attention(kv: PagedKvView, args: AttentionArgs): void {
    checkAttention(kv, args);
    const rt = this.runtime;
    assert(rt.owns(kv.data), 'WasmOps.attention: the KV pool must be allocated with allocF32 of the same runtime');
    const { numTokens, startPos, shape } = args;
    const endPos = startPos + numTokens;
    const n = numTokens * shape.numHeads * shape.headDim;
    const qp = rt.input('a', args.q, n);
    const op = rt.owns(args.out) ? args.out.byteOffset : rt.scratch('c', n * 4);
    const pageTable = rt.input('b', args.pageTable, Math.ceil(endPos / kv.pageSize));
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
      rt.scratch('d', (endPos + 4) * 4),
      args.window ?? 0,
    );
    rt.output(op, args.out, n);
  }
}

export async function createWasmOps(options: WasmRuntimeOptions & { runtime?: WasmRuntime } = {}): Promise<WasmOps> {
  return new WasmOps(options.runtime ?? (await WasmRuntime.load(options)));
}
