// Dense matmul through Tessera's own native kernels (dense.c, a Node-API addon built into
// build/tessera-native.node by scripts/build-native.mjs): AVX-512 VNNI (or, on CPUs without it,
// AVX2 + FMA + F16C: the addon's variant, chosen by CPUID or forced with selectNativeVariant,
// the CLI's --cpu) dot products straight on
// GGML block weights (q4_0, q8_0, q4_K, q5_K, q6_K, repacked once at prepare and kept at their
// own bit width) and on f32 / f16 / bf16 rows (f16 and bf16 stay 16-bit in memory). Activations
// are quantized (rounded, for f16 / bf16 weights) exactly as llama.cpp's CPU backend does for
// each weight kind: Q8_0 per 32 for q4_0/q8_0, Q8_K per 256 for K-quants (dense.c), so a result
// matches the f32 reference run on those activations to float rounding (dense-cases' 'llama.cpp'
// activations) and llama.cpp's own to within its float ops (test/llama-cpp/kernel-matrix).
// Synchronous: a call runs on the calling thread (the engine thread in every role), with the
// addon's helper threads taking chunks of rows when threads > 1, and returns when all are done.
// Each output row is computed by the same arithmetic whatever m is: batch-invariant.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { assert } from '../../core/index.js';
import { checkMatmul, checkWeight } from '../layout.js';
import type { DenseKernels, DenseWeight, ExpertsInPlace, HostTensor, WeightDType } from '../types.js';
import { nativeExpertsInPlace, type ExpertsAddon } from './experts-native.js';
import { findPackageRoot } from '../wasm/locate.js';

/** The addon's instruction-set variants (dense-avx512.c / attention-avx512.c, dense-avx2.c / attention-avx2.c). */
export type NativeVariant = 'avx512' | 'avx2';
/** A choice of variant: 'auto' takes the best this CPU runs. */
export type NativeVariantChoice = 'auto' | NativeVariant;
export const NATIVE_VARIANT_CHOICES: readonly NativeVariantChoice[] = ['auto', 'avx512', 'avx2'];

/** What each variant needs of the CPU (checked by CPUID in dense.c). */
export const NATIVE_VARIANT_FEATURES: Readonly<Record<NativeVariant, readonly string[]>> = {
  avx512: ['avx512f', 'avx512bw', 'avx512vl', 'avx512vnni', 'avx2', 'fma', 'f16c'],
  avx2: ['avx2', 'fma', 'f16c'],
};

/** The addon's functions (experts.c's `experts`: ExpertsAddon, beside its caller). */
export interface Addon extends ExpertsAddon {
  /** Whether this CPU runs any variant. */
  supported(): boolean;
  /** The variant in use, or null when the CPU runs none. */
  variant(): NativeVariant | null;
  /** Uses `name` from now on ('auto': the best); false (nothing changed) when the CPU lacks it. */
  setVariant(name: NativeVariantChoice): boolean;
  repackedBytes(kind: number, rows: number, cols: number): number;
  repack(kind: number, src: Uint8Array, rows: number, cols: number, dst: Uint8Array): void;
  matmul(
    kind: number,
    w: Uint8Array,
    rows: number,
    cols: number,
    x: Float32Array,
    m: number,
    y: Float32Array,
    helpers: 0 | 1,
  ): void;
  setThreads(threads: number, spinMicros: number): boolean;
  /** Chunks of shared calls (matmul rows, attention items) the helper threads computed since load. */
  helperChunks(): number;
  /** The lowest index of the largest value, NaN never chosen; -1 when none is above -infinity (argmax.c). */
  argmax(x: Float32Array): number;
  /**
   * rowops.c: op 0 RMSNorm (y: the weight), 1 SiLU·mul over fused gate | up rows (y unused), 2
   * out += y, 3 SiLU·mul of x and y; rows of width, shared with the helper threads when helpers is
   * 1; the wasm kernels' bits.
   */
  rowOp(
    op: 0 | 1 | 2 | 3,
    x: Float32Array,
    y: Float32Array | null,
    out: Float32Array,
    rows: number,
    width: number,
    eps: number,
    helpers: 0 | 1,
  ): void;
  /**
   * Bytes [offset, offset + length) of a file (offset page-aligned, length at most 2^32) mapped
   * MAP_PRIVATE, PROT_READ (writable 1: the `writable-weights-map` fault point's PROT_READ |
   * PROT_WRITE, copy-on-write); unmapped when collected (mapfile.c).
   */
  mapFile(path: string, writable: 0 | 1, offset: number, length: number): Uint8Array;
  /** Drops this process's pages of a mapFile buffer (MADV_DONTNEED; false, nothing done, for any other buffer). */
  releaseFilePages(buffer: ArrayBuffer): boolean;
  /**
   * lora.c: y[t, offset + i] += scale · Σ_q bT[q, i] (A x[t])[q] for t in rows[0, numRows); A [rank, inDim],
   * bT [rank, outDim]; half 1: x and A·x rounded to f16 first. Each row's bits independent of the others.
   */
  loraRows(
    a: Float32Array,
    bT: Float32Array,
    x: Float32Array,
    rows: Int32Array,
    numRows: number,
    y: Float32Array,
    rank: number,
    inDim: number,
    outDim: number,
    width: number,
    offset: number,
    scale: number,
    half: 0 | 1,
  ): void;
  /** Zeroed memory the addon owns, 2 MiB aligned, advised to use huge pages (dense.c). */
  alloc(bytes: number): Uint8Array;
  /**
   * Paged attention for one request in one layer (attention.c; window 0: none), its (token, KV
   * head) items shared with the helper threads when helpers is 1 (bit-identical either way).
   */
  attention(
    pool: Float32Array | Uint16Array | Uint8Array,
    numLayers: number,
    pageSize: number,
    numKvHeads: number,
    headDim: number,
    layer: number,
    pageTable: Int32Array,
    q: Float32Array,
    out: Float32Array,
    numTokens: number,
    startPos: number,
    numHeads: number,
    scale: number,
    window: number,
    helpers: 0 | 1,
    /** gpt-oss's attention sinks, one logit per head; null: none. */
    sinks: Float32Array | null,
  ): void;
  /**
   * One layer of a step for every sequence at once (attention-layer.c): RoPE of q and k from fused
   * q | k | v rows by a cos | sin table, K and V into an f32 pool, and every (sequence, token, KV
   * head) item of attention, shared with the helper threads as one job when helpers is 1; the same
   * bits as the wasm rope, writeKv and attention() per sequence.
   */
  attendLayer(
    pool: Float32Array,
    numLayers: number,
    pageSize: number,
    numKvHeads: number,
    headDim: number,
    layer: number,
    qkv: Float32Array,
    numTokens: number,
    numHeads: number,
    scale: number,
    cosSin: Float32Array,
    seqs: Int32Array,
    numSeqs: number,
    pageTables: Int32Array,
    q: Float32Array,
    out: Float32Array,
    helpers: 0 | 1,
  ): void;
}

export interface NativeDenseOptions {
  /**
   * Threads that share each call's rows: the calling thread and threads - 1 helper threads of
   * the addon (default 1). The helpers are one set per process, as many as the largest
   * NativeDense asked for; an instance with threads > 1 lets all of them take rows.
   */
  readonly threads?: number;
  /** How long a helper spins for the next call before it sleeps (default 100 µs; set by the NativeDense that starts the helpers). */
  readonly spinMicros?: number;
  /**
   * Calls with fewer x rows than this run on the calling thread alone (default 4). Batch-1
   * decode is bound by memory, not arithmetic: a second thread bought nothing there on 2 cores
   * and its spinning took the core the event loop and the attention kernels need (measured).
   */
  readonly helperMinM?: number;
  /**
   * Weights of at least this many bytes use the helpers at any m (default 256 KiB): reading one
   * takes long enough to pay for waking a helper, and two cores draw more memory bandwidth than
   * one. At 2 MiB every m100 layer matrix ran on one thread at batch 1; at 256 KiB, m100 q4_0
   * batch-1 decode on 2 idle cores went from 471 / 462 to 531 / 578 tok/s (two runs), against
   * llama-bench from 0.94-0.95x to 0.94-1.09x at depth 0 and 1.00-1.02x to 1.24x at depth 512.
   */
  readonly helperMinBytes?: number;
}

const KIND: Readonly<Record<WeightDType, number>> = {
  f32: 0,
  f16: 1,
  bf16: 2,
  q4_0: 3,
  q8_0: 4,
  q4_k: 5,
  q5_k: 6,
  q6_k: 7,
};

/** The arenas small repacked weights share (NativeDense's #allocWeight). */
const ARENA_BYTES = 64 * 2 ** 20;

let loaded: { addon: Addon } | { why: string } | undefined;
/** Threads the addon's helper set serves now (helpers + 1); it only grows. */
let helperThreads = 1;

/** The addon, or why it cannot be used here (not built, failed to load, CPU without AVX-512 VNNI). */
export function nativeAvailability(): { addon: Addon } | { why: string } {
  if (loaded !== undefined) return loaded;
  const path = join(findPackageRoot(), 'build', 'tessera-native.node');
  if (!existsSync(path)) loaded = { why: `${path} is not built (no C compiler at \`npm run build\`?)` };
  else {
    try {
      const addon = createRequire(import.meta.url)(path) as Addon;
      loaded = addon.supported()
        ? { addon }
        : { why: 'this CPU has neither AVX-512 (F, BW, VL, VNNI) nor AVX2 + FMA + F16C' };
    } catch (cause) {
      loaded = { why: `${path} failed to load: ${(cause as Error).message}` };
    }
  }
  return loaded;
}

/**
 * The addon's argmax (argmax.c: baseline x86-64, ~5 µs over 32000 logits) when the addon loads
 * here, else null: the lowest index of the largest value, NaN never chosen, -1 when no value is
 * above -infinity.
 */
export function nativeArgmax(): ((x: Float32Array) => number) | null {
  const found = nativeAvailability();
  if (!('addon' in found)) return null;
  const { addon } = found;
  return (x) => addon.argmax(x);
}

/** The addon's LoRA term (Addon.loraRows), or null when the addon is not available. */
export function nativeLoraRows(): Addon['loraRows'] | null {
  const found = nativeAvailability();
  if (!('addon' in found)) return null;
  const { addon } = found;
  return (...args) => addon.loraRows(...args);
}

/** One mapped piece of a file: its bytes from `start` on. */
export interface MappedPiece {
  readonly start: number;
  readonly buffer: ArrayBuffer;
}

/** Node 20 makes an external ArrayBuffer of at most 2^32 bytes: larger files are mapped in pieces. */
const PIECE_BYTES = 2 ** 32 - 2 ** 16;
/** Pieces start every 2 GiB and overlap by ~2 GiB, so any range of at most that much lies whole in one. */
export const PIECE_STRIDE = 2 ** 31;

/**
 * `path` (of `size` bytes) mapped read-only into this thread's address space (mapfile.c):
 * ArrayBuffers over the file, one piece every PIECE_STRIDE bytes (one in all for a file of up
 * to ~4 GiB), each unmapped when collected (so it cannot be transferred: each thread maps its
 * own); or why it cannot be mapped here (the addon not built or not loadable: the caller reads
 * the file instead). A write through it faults; `writable` (a fault point's, tests only) maps it
 * copy-on-write instead. Throws the addon's error (open, stat, mmap) for a file it cannot map.
 */
export function mapFileReadOnly(
  path: string,
  size: number,
  writable = false,
): { pieces: readonly MappedPiece[] } | { why: string } {
  const found = nativeAvailability();
  if (!('addon' in found)) return { why: found.why };
  const pieces: MappedPiece[] = [];
  for (let start = 0; start === 0 || start + PIECE_BYTES - PIECE_STRIDE < size; start += PIECE_STRIDE) {
    const length = Math.min(size - start, PIECE_BYTES);
    pieces.push({ start, buffer: found.addon.mapFile(path, writable ? 1 : 0, start, length).buffer as ArrayBuffer });
  }
  return { pieces };
}

/**
 * After a mapping's bytes were repacked: this process's resident pages of it are dropped (they
 * stay in the page cache; a later read faults one back in). A buffer that is not a live mapping
 * is left alone (false). Never changes a byte. A no-op where the addon does not load.
 */
export function releaseMappedPages(buffer: ArrayBuffer): boolean {
  const found = nativeAvailability();
  return 'addon' in found && found.addon.releaseFilePages(buffer);
}

/** The variant the addon uses now, or null when it cannot be used here. */
export function nativeVariant(): NativeVariant | null {
  const found = nativeAvailability();
  return 'addon' in found ? found.addon.variant() : null;
}

/** The variants this CPU runs, best first (none when the addon cannot be used here). */
export function nativeVariantsHere(): NativeVariant[] {
  const found = nativeAvailability();
  if (!('addon' in found)) return [];
  const before = found.addon.variant();
  const here = (['avx512', 'avx2'] as const).filter((v) => found.addon.setVariant(v));
  if (before !== null) found.addon.setVariant(before);
  return here;
}

/**
 * Makes every later native call (dense and attention, the whole process) use `choice`; throws
 * when this CPU lacks it or the addon cannot be used. Prepared weights stay valid: the
 * variants share one layout. Call at start-up (the CLI's --cpu), or between calls in tests.
 */
export function selectNativeVariant(choice: NativeVariantChoice): NativeVariant {
  const found = nativeAvailability();
  if (!('addon' in found)) throw new Error(`--cpu ${choice}: the native kernels are unavailable (${found.why})`);
  if (!found.addon.setVariant(choice))
    throw new Error(`--cpu ${choice}: this CPU lacks ${NATIVE_VARIANT_FEATURES[choice as NativeVariant].join(', ')}`);
  return found.addon.variant()!;
}

class NativeWeight implements DenseWeight {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly dtype: WeightDType,
    readonly kind: number,
    /** The weight in dense.c's layout (block kinds) or as in the file (float kinds). */
    readonly bytes: Uint8Array,
    readonly owner: NativeDense,
  ) {}
}

export class NativeDense implements DenseKernels {
  readonly name = 'native' as const;
  readonly batchInvariant = true;
  readonly #addon: Addon;
  readonly #useHelpers: boolean;
  readonly #helperMinM: number;
  readonly #helperMinBytes: number;
  /** The arena small weights are carved from, and how much of it is used. */
  #arena: Uint8Array | null = null;
  #arenaUsed = 0;

  constructor(options: NativeDenseOptions = {}) {
    const found = nativeAvailability();
    assert('addon' in found, () => `NativeDense: ${'why' in found ? found.why : ''}`);
    const threads = options.threads ?? 1;
    assert(Number.isInteger(threads) && threads >= 1, () => `NativeDense: threads must be a positive integer`);
    this.#addon = found.addon;
    this.#useHelpers = threads > 1;
    this.#helperMinM = options.helperMinM ?? 4;
    this.#helperMinBytes = options.helperMinBytes ?? 256 * 2 ** 10;
    if (threads > 1 && threads > helperThreads) {
      assert(this.#addon.setThreads(threads, options.spinMicros ?? 100), 'NativeDense: cannot start helper threads');
      helperThreads = threads;
    }
  }

  async prepare(weight: HostTensor): Promise<DenseWeight> {
    return this.prepareSync(weight);
  }

  prepareSync(weight: HostTensor): NativeWeight {
    const { rows, cols } = checkWeight(weight);
    const kind = KIND[weight.dtype];
    // Copied and repacked (float weights into panels of 32 rows, dense.c's floatPanel), into
    // memory independent of the file buffer's lifetime.
    const bytes = this.#allocWeight(this.#addon.repackedBytes(kind, rows, cols));
    this.#addon.repack(kind, weight.data, rows, cols, bytes);
    return new NativeWeight(rows, cols, weight.dtype, kind, bytes, this);
  }

  /**
   * The addon's memory for one repacked weight. alloc() rounds to 2 MiB huge pages, which an MoE's
   * thousands of small experts (Qwen3-30B-A3B's down: 0.9 MB each) would more than double: 13.0 GiB
   * resident for 8.6 GB of weights (measured). Weights under a quarter of an arena are carved from
   * 64 MiB arenas at 64-byte alignment (an arena is freed when its last weight is collected).
   */
  #allocWeight(bytes: number): Uint8Array {
    if (bytes >= ARENA_BYTES / 4) return this.#addon.alloc(bytes);
    const at = Math.ceil(this.#arenaUsed / 64) * 64;
    if (this.#arena === null || at + bytes > this.#arena.byteLength) {
      this.#arena = this.#addon.alloc(ARENA_BYTES);
      this.#arenaUsed = bytes;
      return this.#arena.subarray(0, bytes);
    }
    this.#arenaUsed = at + bytes;
    return this.#arena.subarray(at, at + bytes);
  }

  async matmul(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Promise<Float32Array> {
    return this.matmulSync(weight, x, m, out);
  }

  matmulSync(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Float32Array {
    assert(
      weight instanceof NativeWeight && weight.owner === this,
      'NativeDense.matmul: weight was not prepared by this NativeDense',
    );
    const { rows, cols } = weight;
    checkMatmul(rows, cols, x, m, out);
    const y = out ?? new Float32Array(m * rows);
    if (m === 0) return y;
    this.#addon.matmul(
      weight.kind,
      weight.bytes,
      rows,
      cols,
      x,
      m,
      y,
      this.#useHelpers && (m >= this.#helperMinM || weight.bytes.byteLength >= this.#helperMinBytes) ? 1 : 0,
    );
    return y;
  }

  /** A GGUF's q4_0 / q8_0 experts read in place (experts-native.ts), else null. */
  expertsInPlace(
    gate: readonly HostTensor[],
    up: readonly HostTensor[],
    down: readonly HostTensor[],
  ): ExpertsInPlace | null {
    return nativeExpertsInPlace(this.#addon, gate, up, down, this.#useHelpers);
  }

  async dispose(): Promise<void> {}
}
