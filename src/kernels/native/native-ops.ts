// OpKernels whose attention runs on the native addon (attention.c: AVX-512 or AVX2, the addon's variant) and
// everything else on the wasm kernels it wraps: the KV pool is still allocated in, and written
// by, the wasm runtime's memory, and the addon reads it in place through the pool's typed array.
// Why attention alone: in a decode step it is the one op whose cost grows with each request's
// context, and in wasm it took ~1.2 ms per request per step on m100 at a 175-token context (a
// third of a batch-8 step on one core), where the rest of the ops together took ~0.3 ms.
// Checks as WasmOps does (layout.ts's checkAttention: page table covering the positions, inside
// the pool), and the addon checks the page numbers against the pool again before it reads.
// With threads > 1, a call's (token, KV head) items are shared with the addon's helper threads
// (the same set NativeDense's matmuls use), each item whole on one thread: the same bits.
import { checkAttention, checkLengths } from '../layout.js';
import type { AttentionArgs, LayerAttentionArgs, OpKernels, PagedKvView, RopeArgs } from '../types.js';
import type { WasmOps } from '../wasm/ops.js';
import { nativeAvailability, type Addon } from './native.js';

/** rowops.c's ops (Addon.rowOp's first argument). */
const ROW_RMS_NORM = 0;
const ROW_SILU_MUL_ROWS = 1;
const ROW_ADD = 2;
const ROW_SILU_MUL = 3;

export interface NativeAttentionOptions {
  /**
   * Threads that share each attention call's (token, KV head) items: the calling thread and the
   * addon's helper threads, which a NativeDense with as many threads starts (default 1: alone).
   * The output is bit-identical at any count.
   */
  readonly threads?: number;
}

export class NativeAttentionOps implements OpKernels {
  readonly name = 'wasm+native' as const;
  readonly wasm: WasmOps;
  readonly #addon: Addon;
  readonly #helpers: 0 | 1;

  constructor(wasm: WasmOps, options: NativeAttentionOptions = {}) {
    const found = nativeAvailability();
    if (!('addon' in found)) throw new Error(`NativeAttentionOps: ${found.why}`);
    this.wasm = wasm;
    this.#addon = found.addon;
    this.#helpers = (options.threads ?? 1) > 1 ? 1 : 0;
  }

  allocF32(length: number): Float32Array {
    return this.wasm.allocF32(length);
  }

  allocU16(length: number): Uint16Array {
    return this.wasm.allocU16(length);
  }

  allocU8(length: number): Uint8Array {
    return this.wasm.allocU8(length);
  }

  // RMSNorm, SiLU·mul and add on the addon (rowops.c: the wasm kernels' arithmetic, bit for bit),
  // reading and writing the arrays in place (no copy into wasm memory and back), their rows shared
  // with the helper threads in a prefill chunk.
  rmsNorm(x: Float32Array, weight: Float32Array, eps: number, m: number, dim: number, out: Float32Array): void {
    checkLengths('rmsNorm', m * dim, x, out);
    checkLengths('rmsNorm weight', dim, weight);
    this.#addon.rowOp(ROW_RMS_NORM, x, weight, out, m, dim, eps, this.#helpers);
  }

  rope(args: RopeArgs): void {
    this.wasm.rope(args);
  }

  siluMul(gate: Float32Array, up: Float32Array, out: Float32Array, n: number): void {
    checkLengths('siluMul', n, gate, up, out);
    if (n > 0) this.#addon.rowOp(ROW_SILU_MUL, gate, up, out, 1, n, 0, this.#helpers);
  }

  geluTanhMul(gate: Float32Array, up: Float32Array, out: Float32Array, n: number): void {
    this.wasm.geluTanhMul(gate, up, out, n);
  }

  // gate | up rows as the fused projection writes them: no copy into gate and up first.
  siluMulRows(gateUp: Float32Array, out: Float32Array, rows: number, width: number): void {
    checkLengths('siluMulRows', 2 * rows * width, gateUp);
    checkLengths('siluMulRows out', rows * width, out);
    if (rows > 0) this.#addon.rowOp(ROW_SILU_MUL_ROWS, gateUp, null, out, rows, width, 0, this.#helpers);
  }

  addInPlace(x: Float32Array, y: Float32Array, n: number): void {
    checkLengths('addInPlace', n, x, y);
    if (n > 0) this.#addon.rowOp(ROW_ADD, x, y, x, 1, n, 0, this.#helpers);
  }

  writeKv(...args: Parameters<OpKernels['writeKv']>): void {
    this.wasm.writeKv(...args);
  }

  // One call per layer for the whole step (attention-layer.c), which checks every sequence's
  // rows, page table and pages against the pool before it writes anything.
  attendLayer(kv: PagedKvView, args: LayerAttentionArgs): void {
    if (kv.dtype !== 'f32') throw new Error(`attendLayer: an f32 pool only, not ${kv.dtype}`);
    const { shape } = args;
    this.#addon.attendLayer(
      kv.data,
      kv.numLayers,
      kv.pageSize,
      kv.numKvHeads,
      kv.headDim,
      args.layer,
      args.qkv,
      args.numTokens,
      shape.numHeads,
      shape.scale,
      args.cosSin,
      args.seqs,
      args.numSeqs,
      args.pageTables,
      args.q,
      args.out,
      this.#helpers,
    );
  }

  attention(kv: PagedKvView, args: AttentionArgs): void {
    checkAttention(kv, args);
    const { shape } = args;
    this.#addon.attention(
      kv.data,
      kv.numLayers,
      kv.pageSize,
      kv.numKvHeads,
      kv.headDim,
      args.layer,
      args.pageTable,
      args.q,
      args.out,
      args.numTokens,
      args.startPos,
      shape.numHeads,
      shape.scale,
      args.window ?? 0,
      this.#helpers,
      args.sinks ?? null,
    );
  }
}
