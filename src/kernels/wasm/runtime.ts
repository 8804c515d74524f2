// One instance of the WebAssembly kernels and the memory they work in. Owns the shared linear
// memory, a bump allocator over it (allocations live as long as the runtime: the KV pool,
// weights, activations are allocated once at start-up) and reusable scratch buffers for inputs
// that are not already views into the memory. Must never hand out overlapping regions or let
// a view detach: the memory is a shared WebAssembly.Memory, whose views stay valid when it grows.
//
//   memory: | static data | bump allocations (views, weights) ... | free ... up to maxMemoryBytes |
//                          ^ heapBase                              ^ top
import { readFileSync } from 'node:fs';
import { ConfigError, assert } from '../../core/index.js';
import { findKernelsWasm } from './locate.js';
import { type WasmInstance, type WasmMemory, type WasmModule, webAssembly } from './webassembly.js';

const PAGE_BYTES = 65536;
/** wasm32 addresses at most 4 GiB: the default maximum, reserved (not committed) up front. */
export const MAX_WASM_MEMORY_BYTES = 4 * 1024 ** 3;

export interface KernelExports {
  heapBase(): number;
  matmul(
    kind: number,
    w: number,
    scales: number,
    x: number,
    y: number,
    m: number,
    rows: number,
    cols: number,
    r0: number,
    r1: number,
    scratch: number,
  ): void;
  rmsNorm(x: number, weight: number, eps: number, m: number, dim: number, out: number): void;
  rope(
    x: number,
    numTokens: number,
    numHeads: number,
    headDim: number,
    positions: number,
    invFreq: number,
    attentionFactor: number,
    table: number,
  ): void;
  siluMul(gate: number, up: number, out: number, n: number): void;
  geluTanhMul(gate: number, up: number, out: number, n: number): void;
  addInPlace(x: number, y: number, n: number): void;
  sumF32(data: number, n: number): number;
  attention(
    pool: number,
    numLayers: number,
    pageSize: number,
    numKvHeads: number,
    headDim: number,
    layer: number,
    pageTable: number,
    q: number,
    out: number,
    numTokens: number,
    startPos: number,
    numHeads: number,
    scale: number,
    /** numHeads stretches of `stride` floats (stride >= startPos + numTokens + 1, a multiple of 4). */
    scores: number,
    stride: number,
    window: number,
    /** [numHeads] f32 attention sinks (gpt-oss); 0: none. */
    sinks: number,
  ): void;
  /** attention over an f16 pool: the same arguments, with a rows scratch before the window. */
  attentionF16: RowsAttention;
  /** attention over a q8_0 pool: attentionF16's arguments (rows: one page of f32 rows). */
  attentionQ8: RowsAttention;
  f32ToF16Row(src: number, dst: number, n: number): void;
  /** numHeadRows rows of headDim f32 -> q8_0 head rows back to back (src/kernels/q8-kv.ts's bytes). */
  quantizeRowsQ8(src: number, numHeadRows: number, headDim: number, dst: number): void;
}

export interface WasmRuntimeOptions {
  /** Upper bound of the linear memory, at most 4 GiB (the default). Only what is allocated is committed. */
  readonly maxMemoryBytes?: number;
}

interface ScratchSlot {
  ptr: number;
  bytes: number;
}

export class WasmRuntime {
  readonly module: WasmModule;
  readonly memory: WasmMemory;
  readonly kernels: KernelExports;
  readonly maxMemoryBytes: number;
  #top: number;
  readonly #buffers = new Set<ArrayBufferLike>();
  readonly #scratch = new Map<string, ScratchSlot>();

  private constructor(module: WasmModule, memory: WasmMemory, instance: WasmInstance, maxMemoryBytes: number) {
    this.module = module;
    this.memory = memory;
    this.kernels = instance.exports as unknown as KernelExports;
    this.maxMemoryBytes = maxMemoryBytes;
    this.#top = alignUp(this.kernels.heapBase(), 64);
  }

  static async load(options: WasmRuntimeOptions = {}): Promise<WasmRuntime> {
    const maxMemoryBytes = options.maxMemoryBytes ?? MAX_WASM_MEMORY_BYTES;
    assert(
      maxMemoryBytes >= PAGE_BYTES && maxMemoryBytes <= MAX_WASM_MEMORY_BYTES,
      () => `wasm memory maximum ${maxMemoryBytes} outside [64 KiB, 4 GiB]`,
    );
    const wasm = webAssembly();
    const module = await wasm.compile(readFileSync(findKernelsWasm()));
    const memory = new wasm.Memory({ initial: 1, maximum: Math.floor(maxMemoryBytes / PAGE_BYTES), shared: true });
    const instance = await wasm.instantiate(module, { env: { memory, abort: wasmAbort } });
    return new WasmRuntime(module, memory, instance, maxMemoryBytes);
  }

  /** Bytes handed out so far (including static data). */
  get usedBytes(): number {
    return this.#top;
  }

  /** A fresh region of `bytes` (zeroed: regions are never reused), aligned to 64 bytes. */
  alloc(bytes: number): number {
    assert(Number.isInteger(bytes) && bytes >= 0, () => `wasm alloc: bad size ${bytes}`);
    const ptr = this.#top;
    const end = alignUp(ptr + bytes, 64);
    if (end > this.maxMemoryBytes) {
      throw new ConfigError(
        `WebAssembly memory exhausted: ${mib(bytes)} MiB requested, ${mib(ptr)} MiB of the ${mib(this.maxMemoryBytes)} MiB maximum in use ` +
          '(the KV pool, wasm-resident weights and activations share it): lower --kv-memory or use fewer pages',
      );
    }
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE_BYTES));
    this.#top = end;
    return ptr;
  }

  f32(ptr: number, length: number): Float32Array {
    return new Float32Array(this.#buffer(), ptr, length);
  }

  u16(ptr: number, length: number): Uint16Array {
    return new Uint16Array(this.#buffer(), ptr, length);
  }

  u8(ptr: number, length: number): Uint8Array {
    return new Uint8Array(this.#buffer(), ptr, length);
  }

  i32(ptr: number, length: number): Int32Array {
    return new Int32Array(this.#buffer(), ptr, length);
  }

  /** True when `view` lies in this runtime's memory, so kernels can use it without a copy. */
  owns(view: ArrayBufferView): boolean {
    return this.#buffers.has(view.buffer);
  }

  /**
   * A reusable region of at least `bytes` for one named purpose. The region is valid until the
   * next scratch() call with the same name; callers are synchronous, so uses never overlap.
   */
  scratch(name: string, bytes: number): number {
    const slot = this.#scratch.get(name);
    if (slot !== undefined && slot.bytes >= bytes) return slot.ptr;
    const grown = Math.max(bytes, 2 * (slot?.bytes ?? 0), 4096);
    const fresh = { ptr: this.alloc(grown), bytes: grown };
    this.#scratch.set(name, fresh);
    return fresh.ptr;
  }

  /** Pointer to `view`'s data in wasm memory: the view itself when owned, else a scratch copy. */
  input(name: string, view: Float32Array | Int32Array, length: number): number {
    if (this.owns(view)) return view.byteOffset;
    const ptr = this.scratch(name, length * 4);
    new Uint8Array(this.#buffer(), ptr, length * 4).set(new Uint8Array(view.buffer, view.byteOffset, length * 4));
    return ptr;
  }

  /** Copy `length` floats at ptr back into `view` unless `view` is that very region. */
  output(ptr: number, view: Float32Array, length: number): void {
    if (this.owns(view) && view.byteOffset === ptr) return;
    view.set(this.f32(ptr, length));
  }

  #buffer(): ArrayBufferLike {
    const buffer = this.memory.buffer;
    this.#buffers.add(buffer);
    return buffer;
  }
}

function wasmAbort(): never {
  throw new Error('wasm kernel aborted');
}

function alignUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

function mib(bytes: number): string {
  return (bytes / 1024 ** 2).toFixed(1);
}

/** An attention kernel over a pool whose rows it converts to f32 in a `rows` scratch first (f16, q8_0). */
type RowsAttention = (
  pool: number,
  numLayers: number,
  pageSize: number,
  numKvHeads: number,
  headDim: number,
  layer: number,
  pageTable: number,
  q: number,
  out: number,
  numTokens: number,
  startPos: number,
  numHeads: number,
  scale: number,
  scores: number,
  stride: number,
  rows: number,
  window: number,
  sinks: number,
) => void;
