// The page-major layout of the KV pool, and the copies in and out of it that transfers use.
// Owns: the PagedKvView shape, offsets, gather/scatter of slot ranges.
// Must never: check ownership (callers run PagePool.checkRead/checkWrite first), hand out a
// view into the pool (a frame in flight must not change when the page is reused), or loop per
// float (every copy is a TypedArray `set` of a contiguous run).
//
// Layout (the shape and view are core's KvShape and PagedKvView, which src/kernels reads too):
//
//   data[(((page * numLayers + layer) * 2 + kv) * pageSize + slot) * rowUnits + i]
//        kv = 0 for K, 1 for V;  rowUnits = kvRowUnits(shape): the units of one slot's row,
//        numKvHeads * headDim elements of f32 (e = 4 bytes) or f16 (IEEE half bits, e = 2) under
//        --kv-dtype f16, or under q8_0 numKvHeads * kvHeadBytes bytes of q8_0 blocks (e = 1;
//        core/kv-view.ts's Q8_0 LAYOUT: an f16 scale per 32 values, 1.0625 bytes a value)
//
//   page p:  | layer 0        | layer 1        | ... | layer L-1      |
//            | K[slots] V[slots] | K[slots] V[slots] | ...
//            each K or V block is pageSize * rowUnits units, slot-major.
//
// A slot range [firstSlot, firstSlot + numSlots) of one page is therefore 2 * numLayers
// contiguous runs of numSlots * rowUnits units; a whole page is one contiguous run. Payloads
// carry the pool's own elements (no conversion): both ends of a transfer store one dtype.
//
// The payload of a slot range (what gatherSlots returns, what a KvChunk carries) is those runs
// back to back: byte offset o of the payload is run r = floor(o / runBytes) (layer r >> 1,
// K for even r, V for odd r), byte o % runBytes of it. scatterSlotsPiece writes any piece
// [o, o + n) of a payload by that rule, so a receiver can land a frame as it comes off the
// wire; scatterSlots (the whole payload at once) is its reference.
import {
  assert,
  kvRowUnits,
  kvUnitBytes,
  type KvData,
  type KvDtype,
  type KvShape,
  type PagedKvView,
  type PageId,
} from '../core/index.js';

export type { KvData, KvDtype, KvShape, PagedKvView };

/** The shape's element type: 'f32' unless it says otherwise. */
export function kvDtypeOf(shape: KvShape): KvDtype {
  return shape.dtype ?? 'f32';
}

/** Bytes of one unit of `data` (an f32, an f16, or a q8_0 byte). */
function elementBytes(shape: KvShape): number {
  return kvUnitBytes(kvDtypeOf(shape));
}

/** Gathered bytes are the pool's elements in host byte order; every platform Node 20 runs on here is little-endian. */
const HOST_IS_LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

export function kvDimOf(shape: KvShape): number {
  return shape.numKvHeads * shape.headDim;
}

/** Units of `data` (f32 or f16 elements, q8_0 bytes) in one slot's row of one layer's K or V. */
export function rowUnitsOf(shape: KvShape): number {
  return kvRowUnits(shape);
}

/** Units of `data` (f32 or f16 elements, q8_0 bytes) in one page (all layers, K and V). */
export function elementsPerPage(shape: KvShape): number {
  return shape.numLayers * 2 * shape.pageSize * rowUnitsOf(shape);
}

/** Bytes that gatherSlots returns for numSlots slots of one page. */
export function slotRangeBytes(shape: KvShape, numSlots: number): number {
  return shape.numLayers * 2 * numSlots * rowUnitsOf(shape) * elementBytes(shape);
}

/** Index in `data` of unit 0 of (page, layer, kv, slot). */
export function kvOffset(shape: KvShape, page: number, layer: number, kv: 0 | 1, slot: number): number {
  return (((page * shape.numLayers + layer) * 2 + kv) * shape.pageSize + slot) * rowUnitsOf(shape);
}

function assertShape(shape: KvShape): void {
  for (const key of ['numPages', 'pageSize', 'numLayers', 'numKvHeads', 'headDim'] as const) {
    const value = shape[key];
    assert(Number.isSafeInteger(value) && value > 0, () => `KV pool ${key} must be a positive integer, got ${value}`);
  }
}

/**
 * A view over `data` (e.g. from OpKernels.allocF32 / allocU16 / allocU8, so kernels read it without
 * copying), or over fresh zeroed storage when no data is given: a Float32Array for f32, a
 * Uint16Array of half bit patterns for f16, a Uint8Array of q8_0 blocks for q8_0.
 */
export function createKvView(shape: KvShape, data?: KvData): PagedKvView {
  assertShape(shape);
  assert(HOST_IS_LITTLE_ENDIAN, 'the KV wire format assumes a little-endian host');
  const length = shape.numPages * elementsPerPage(shape);
  assert(Number.isSafeInteger(length), () => `KV pool of ${length} elements is too large`);
  const geometry = {
    numPages: shape.numPages,
    pageSize: shape.pageSize,
    numLayers: shape.numLayers,
    numKvHeads: shape.numKvHeads,
    headDim: shape.headDim,
  };
  const dtype = kvDtypeOf(shape);
  const check = (storage: KvData): void =>
    assert(
      storage.length === length,
      () => `KV pool storage has ${storage.length} elements, the shape needs ${length}`,
    );
  switch (dtype) {
    case 'f32': {
      assert(data === undefined || data instanceof Float32Array, 'an f32 KV pool is stored in a Float32Array');
      const storage = data ?? new Float32Array(length);
      check(storage);
      return { ...geometry, dtype, data: storage };
    }
    case 'f16': {
      assert(data === undefined || data instanceof Uint16Array, 'an f16 KV pool is stored in a Uint16Array');
      const storage = data ?? new Uint16Array(length);
      check(storage);
      return { ...geometry, dtype, data: storage };
    }
    case 'q8_0': {
      assert(data === undefined || data instanceof Uint8Array, 'a q8_0 KV pool is stored in a Uint8Array');
      const storage = data ?? new Uint8Array(length);
      check(storage);
      return { ...geometry, dtype, data: storage };
    }
  }
}

function assertSlotRange(view: KvShape, page: PageId, firstSlot: number, numSlots: number): void {
  assert(
    Number.isInteger(page) && page >= 0 && page < view.numPages,
    () => `page ${page} is outside the pool (0..${view.numPages - 1})`,
  );
  assert(
    Number.isInteger(firstSlot) &&
      Number.isInteger(numSlots) &&
      firstSlot >= 0 &&
      numSlots >= 0 &&
      firstSlot + numSlots <= view.pageSize,
    () => `slot range [${firstSlot}, ${firstSlot + numSlots}) is outside a page of ${view.pageSize} slots`,
  );
}

/**
 * The bytes of one page. Made per call over that page only: a pool can be larger than the
 * biggest Uint8Array, and a view made per call never outlives a replaced buffer.
 */
function pageBytes(view: PagedKvView, page: PageId): Uint8Array {
  const perPage = elementsPerPage(view) * elementBytes(view);
  return new Uint8Array(view.data.buffer, view.data.byteOffset + page * perPage, perPage);
}

/**
 * Copy slots [firstSlot, firstSlot + numSlots) of one page out of the pool. Byte order:
 * for layer 0..L-1, K then V, slot by slot, one row per slot (kvDim little-endian f32 or f16
 * elements, or a q8_0 row of blocks) — i.e. the pool's
 * own order restricted to the range, so a whole page is one copy.
 *
 * `into`: a buffer of at least slotRangeBytes(numSlots) bytes to copy into (the result is its
 * prefix). Pass one on hot paths: a fresh megabyte-sized buffer per page costs ~20x the copy
 * itself (page faults on new memory), measured on m100 pages.
 */
export function gatherSlots(
  view: PagedKvView,
  page: PageId,
  firstSlot: number,
  numSlots: number,
  into?: Uint8Array,
): Uint8Array {
  assertSlotRange(view, page, firstSlot, numSlots);
  const bytes = pageBytes(view, page);
  const numBytes = slotRangeBytes(view, numSlots);
  assert(
    into === undefined || into.length >= numBytes,
    () => `gather of ${numSlots} slots needs ${numBytes} bytes, the buffer has ${into?.length}`,
  );
  const out = into === undefined ? new Uint8Array(numBytes) : into.subarray(0, numBytes);
  if (firstSlot === 0 && numSlots === view.pageSize) {
    out.set(bytes);
    return out;
  }
  const runBytes = numSlots * rowUnitsOf(view) * elementBytes(view);
  let at = 0;
  for (let layer = 0; layer < view.numLayers; layer++) {
    for (const kv of [0, 1] as const) {
      const start = kvOffset(view, 0, layer, kv, firstSlot) * elementBytes(view);
      out.set(bytes.subarray(start, start + runBytes), at);
      at += runBytes;
    }
  }
  return out;
}

/**
 * Bytes [payloadOffset, payloadOffset + piece.length) of the payload of slots
 * [firstSlot, firstSlot + numSlots) of one page (the order gatherSlots returns) into their
 * places in the page. Pieces at any boundaries, written in any order, leave the page exactly
 * as scatterSlots of the whole payload does.
 */
export function scatterSlotsPiece(
  view: PagedKvView,
  page: PageId,
  firstSlot: number,
  numSlots: number,
  payloadOffset: number,
  piece: Uint8Array,
): void {
  assertSlotRange(view, page, firstSlot, numSlots);
  const total = slotRangeBytes(view, numSlots);
  assert(
    Number.isInteger(payloadOffset) && payloadOffset >= 0 && payloadOffset + piece.length <= total,
    () =>
      `piece [${payloadOffset}, ${payloadOffset + piece.length}) lies outside a payload of ${total} bytes (${numSlots} slots)`,
  );
  const target = pageBytes(view, page);
  if (firstSlot === 0 && numSlots === view.pageSize) {
    target.set(piece, payloadOffset);
    return;
  }
  const runBytes = numSlots * rowUnitsOf(view) * elementBytes(view);
  let at = 0;
  while (at < piece.length) {
    const offset = payloadOffset + at;
    const run = Math.floor(offset / runBytes);
    const within = offset - run * runBytes;
    const take = Math.min(runBytes - within, piece.length - at);
    const start = kvOffset(view, 0, run >> 1, (run & 1) as 0 | 1, firstSlot) * elementBytes(view) + within;
    target.set(at === 0 && take === piece.length ? piece : piece.subarray(at, at + take), start);
    at += take;
  }
}

/** The inverse of gatherSlots: write `bytes` (any alignment) into slots of one page. */
export function scatterSlots(
  view: PagedKvView,
  page: PageId,
  firstSlot: number,
  numSlots: number,
  bytes: Uint8Array,
): void {
  assertSlotRange(view, page, firstSlot, numSlots);
  const expected = slotRangeBytes(view, numSlots);
  assert(bytes.length === expected, () => `scatter of ${numSlots} slots needs ${expected} bytes, got ${bytes.length}`);
  const target = pageBytes(view, page);
  if (firstSlot === 0 && numSlots === view.pageSize) {
    target.set(bytes);
    return;
  }
  const runBytes = numSlots * rowUnitsOf(view) * elementBytes(view);
  let at = 0;
  for (let layer = 0; layer < view.numLayers; layer++) {
    for (const kv of [0, 1] as const) {
      target.set(bytes.subarray(at, at + runBytes), kvOffset(view, 0, layer, kv, firstSlot) * elementBytes(view));
      at += runBytes;
    }
  }
}
