// The KV pool as memory: its shape, its element type and the one typed array behind it. Declared
// here, below both src/pages (which owns the layout and the copies in and out) and src/kernels
// (which read and write it in attention), so there is one definition; the layout itself is
// pages/kv-layout.ts. Must never: carry behaviour beyond the element size of a dtype.

/**
 * How the pool stores one K or V element: 'f32' (4 bytes) or 'f16' (IEEE half, 2 bytes, rounded
 * to nearest even when written; attention promotes it to f32). A node's KV dtype is part of its
 * KV layout: PD nodes move KV only between equal ones.
 */
export type KvDtype = 'f32' | 'f16';

export const KV_DTYPES: readonly KvDtype[] = ['f32', 'f16'];

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
 * indexed by element either way; f16 elements are IEEE half bit patterns.
 */
export type PagedKvView =
  | (KvGeometry & { readonly dtype: 'f32'; readonly data: Float32Array })
  | (KvGeometry & { readonly dtype: 'f16'; readonly data: Uint16Array });

/** The storage of a PagedKvView: Float32Array for f32, Uint16Array (half bit patterns) for f16. */
export type KvData = PagedKvView['data'];

/** Bytes of one K or V element. */
export function kvBytesPerElement(dtype: KvDtype): 2 | 4 {
  return dtype === 'f16' ? 2 : 4;
}
