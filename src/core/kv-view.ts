// The KV pool as memory: its shape, its element type and the one typed array behind it. Declared
// here, below both src/pages (which owns the layout and the copies in and out) and src/kernels
// (which read and write it in attention), so there is one definition; the layout itself is
// pages/kv-layout.ts. Must never: carry behaviour beyond the element size of a dtype.

/**
 * How the pool stores one K or V element: 'f32' (4 bytes) or 'f16' (IEEE half, 2 bytes, rounded
 * to nearest even when written; attention promotes it to f32), or 'q8_0' (8-bit with a scale per
 * block of 32, llama.cpp's `-ctk q8_0` block: 34 bytes per 32 values, see Q8_0 LAYOUT below). A
 * node's KV dtype is part of its KV layout: PD nodes move KV only between equal ones.
 */
export type KvDtype = 'f32' | 'f16' | 'q8_0';

export const KV_DTYPES: readonly KvDtype[] = ['f32', 'f16', 'q8_0'];

// Q8_0 LAYOUT. A q8_0 pool is bytes (Uint8Array). Each slot's row of one layer's K (or V) is
// numKvHeads head rows of kvHeadBytes(headDim) bytes; a head row is ceil(headDim / 32) blocks of
// llama.cpp's block_q8_0, { f16 d (little-endian); int8 qs[32] }, the last one cut to
// headDim % 32 values when headDim is not a multiple of 32 (blocks never straddle heads). Value
// i of a head: d(block i >> 5) * qs[i & 31]. Written as llama.cpp's quantize_row_q8_0_ref does:
// d = max|x| / 127, qs = round-half-away(x / d) (x * (1 / d) in f32), d stored as f16; a block
// holding a nan or an infinity stores d = f16 nan (all 32 values read back nan). For the
// headDim of every real model (a multiple of 32) a row is exactly llama.cpp's q8_0 row.

/** Values per q8_0 block. */
export const Q8_BLOCK = 32;
/** Bytes of a full q8_0 block: an f16 scale and 32 int8. */
export const Q8_BLOCK_BYTES = 34;

export interface KvShape {
  readonly numPages: number;
  readonly pageSize: number;
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /** The element type (default 'f32'). */
  readonly dtype?: KvDtype;
}

type KvGeometry = Omit<KvShape, 'dtype'>;

/**
 * The KV pool as kernels see it: page-major, see pages/kv-layout.ts for the order. `data` is
 * indexed by unit (kvRowUnits): f32 and f16 elements (f16: IEEE half bit patterns), q8_0 bytes.
 */
export type PagedKvView =
  | (KvGeometry & { readonly dtype: 'f32'; readonly data: Float32Array })
  | (KvGeometry & { readonly dtype: 'f16'; readonly data: Uint16Array })
  | (KvGeometry & { readonly dtype: 'q8_0'; readonly data: Uint8Array });

/**
 * The storage of a PagedKvView: Float32Array for f32, Uint16Array (half bit patterns) for f16,
 * Uint8Array (q8_0 blocks) for q8_0.
 */
export type KvData = PagedKvView['data'];

/** Bytes of one KV head's row (headDim values) in a pool of `dtype`. */
export function kvHeadBytes(dtype: KvDtype, headDim: number): number {
  switch (dtype) {
    case 'f32':
      return 4 * headDim;
    case 'f16':
      return 2 * headDim;
    case 'q8_0':
      return headDim + 2 * Math.ceil(headDim / Q8_BLOCK);
  }
}

/** Bytes of one storage unit of `data`: 4 (f32), 2 (f16) or 1 (q8_0's bytes). */
export function kvUnitBytes(dtype: KvDtype): 1 | 2 | 4 {
  return dtype === 'f32' ? 4 : dtype === 'f16' ? 2 : 1;
}

/**
 * Units of `data` (elements for f32 and f16, bytes for q8_0) in one slot's row of one layer's K
 * (or V): every offset into the pool is a multiple of it.
 */
export function kvRowUnits(shape: Pick<KvShape, 'numKvHeads' | 'headDim' | 'dtype'>): number {
  const dtype = shape.dtype ?? 'f32';
  return (shape.numKvHeads * kvHeadBytes(dtype, shape.headDim)) / kvUnitBytes(dtype);
}

/**
 * Bytes per K or V value, on average over a head row: 4, 2, or for q8_0 34 / 32 = 1.0625 when
 * headDim is a multiple of 32 (more for a cut last block).
 */
export function kvBytesPerElement(dtype: KvDtype, headDim = Q8_BLOCK): number {
  return kvHeadBytes(dtype, headDim) / headDim;
}
