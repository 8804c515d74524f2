// The KV pool as memory: its shape and the one Float32Array behind it. Declared here, below both
// src/pages (which owns the layout and the copies in and out) and src/kernels (which read and
// write it in attention), so there is one definition; the layout itself is pages/kv-layout.ts.
// Must never: carry behaviour.

export interface KvShape {
  readonly numPages: number;
  readonly pageSize: number;
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
}

/** The KV pool as kernels see it: page-major, see pages/kv-layout.ts for the byte order. */
export interface PagedKvView extends KvShape {
  readonly data: Float32Array;
}
