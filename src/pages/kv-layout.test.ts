import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { asPageId, InvariantError } from '../core/index.js';
import {
  createKvView,
  elementsPerPage,
  gatherSlots,
  scatterSlots,
  scatterSlotsPiece,
  slotRangeBytes,
  type KvShape,
  type PagedKvView,
} from './kv-layout.js';

const SHAPE: KvShape = { numPages: 5, pageSize: 4, numLayers: 3, numKvHeads: 2, headDim: 3 };
const KV_DIM = 6;

/** A pool whose every float holds its own index, so any misplaced copy shows. */
function indexedPool(): PagedKvView {
  const view = createKvView(SHAPE);
  view.data.forEach((_, i) => (view.data[i] = i));
  return view;
}

/** The layout spelled out float by float, straight from the formula in src/kernels/types.ts. */
function referenceGather(view: PagedKvView, page: number, firstSlot: number, numSlots: number): number[] {
  const out: number[] = [];
  for (let layer = 0; layer < view.numLayers; layer++) {
    for (let kv = 0; kv < 2; kv++) {
      for (let slot = firstSlot; slot < firstSlot + numSlots; slot++) {
        for (let i = 0; i < KV_DIM; i++)
          out.push(
            view.data[(((page * view.numLayers + layer) * 2 + kv) * view.pageSize + slot) * KV_DIM + i] as number,
          );
      }
    }
  }
  return out;
}

const asFloats = (bytes: Uint8Array): number[] => [...new Float32Array(bytes.slice().buffer)];

describe('kv layout', () => {
  it('sizes a page and a slot range', () => {
    expect(elementsPerPage(SHAPE)).toBe(3 * 2 * 4 * 6);
    expect(slotRangeBytes(SHAPE, 2)).toBe(3 * 2 * 2 * 6 * 4);
  });

  it.each([
    [2, 0, 4],
    [2, 1, 2],
    [4, 3, 1],
    [0, 0, 0],
  ])('gathers page %i slots [%i, +%i) in layer, K/V, slot order', (page, firstSlot, numSlots) => {
    const view = indexedPool();
    const bytes = gatherSlots(view, asPageId(page), firstSlot, numSlots);
    expect(bytes.length).toBe(slotRangeBytes(view, numSlots));
    expect(asFloats(bytes)).toEqual(referenceGather(view, page, firstSlot, numSlots));
  });

  it('gathers into a caller-supplied buffer, returning its prefix', () => {
    const view = indexedPool();
    const buffer = new Uint8Array(slotRangeBytes(view, 4) + 8).fill(0xff);
    const bytes = gatherSlots(view, asPageId(2), 1, 2, buffer);
    expect(bytes.buffer).toBe(buffer.buffer);
    expect(asFloats(bytes)).toEqual(referenceGather(view, 2, 1, 2));
    expect(buffer[slotRangeBytes(view, 2)]).toBe(0xff);
    expect(() => gatherSlots(view, asPageId(2), 0, 4, new Uint8Array(8))).toThrow(/needs 576 bytes, the buffer has 8/);
  });

  it('returns a copy: a later write to the pool does not change gathered bytes', () => {
    const view = indexedPool();
    const bytes = gatherSlots(view, asPageId(1), 0, 4);
    view.data.fill(-1);
    expect(asFloats(bytes)).toEqual(referenceGather(indexedPool(), 1, 0, 4));
  });

  it('scatters into exactly the slots named, from bytes at any alignment', () => {
    const source = indexedPool();
    const payload = gatherSlots(source, asPageId(1), 1, 2);
    const unaligned = new Uint8Array(payload.length + 1).subarray(1);
    unaligned.set(payload);
    const view = createKvView(SHAPE);
    scatterSlots(view, asPageId(3), 1, 2, unaligned);
    expect(asFloats(gatherSlots(view, asPageId(3), 1, 2))).toEqual(referenceGather(source, 1, 1, 2));
    // Everything else stays zero: slots 0 and 3 of page 3, and every other page.
    const written = [...view.data].filter((x) => x !== 0).length;
    expect(written).toBe(referenceGather(source, 1, 1, 2).filter((x) => x !== 0).length);
    expect(asFloats(gatherSlots(view, asPageId(3), 0, 1)).every((x) => x === 0)).toBe(true);
    expect(asFloats(gatherSlots(view, asPageId(3), 3, 1)).every((x) => x === 0)).toBe(true);
  });

  it('round-trips a whole page through the one-copy path', () => {
    const source = indexedPool();
    const view = createKvView(SHAPE);
    scatterSlots(view, asPageId(0), 0, 4, gatherSlots(source, asPageId(4), 0, 4));
    expect(asFloats(gatherSlots(view, asPageId(0), 0, 4))).toEqual(referenceGather(source, 4, 0, 4));
  });

  it('refuses ranges outside a page, pages outside the pool, and payloads of the wrong size', () => {
    const view = createKvView(SHAPE);
    expect(() => gatherSlots(view, asPageId(0), 3, 2)).toThrow(InvariantError);
    expect(() => gatherSlots(view, asPageId(5), 0, 1)).toThrow(/outside the pool/);
    expect(() => scatterSlots(view, asPageId(0), 0, 1, new Uint8Array(3))).toThrow(/needs 144 bytes, got 3/);
    expect(() => createKvView({ ...SHAPE, headDim: 0 })).toThrow(/headDim must be a positive integer/);
  });
});

describe('kv layout: scattering a payload piece by piece', () => {
  /** A payload of `numBytes` distinct-looking bytes (never all zero, so a missed byte shows). */
  const payloadOf = (numBytes: number): Uint8Array =>
    Uint8Array.from({ length: numBytes }, (_, i) => ((i * 131 + 7) % 251) + 1);

  it('lands pieces cut at any boundaries, in any order, exactly as scatterSlots lands the whole payload', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: SHAPE.numPages - 1 }),
        fc
          .integer({ min: 0, max: SHAPE.pageSize - 1 })
          .chain((firstSlot) =>
            fc.tuple(fc.constant(firstSlot), fc.integer({ min: 1, max: SHAPE.pageSize - firstSlot })),
          ),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.boolean(),
        (page, [firstSlot, numSlots], rawCuts, reversed) => {
          const payload = payloadOf(slotRangeBytes(SHAPE, numSlots));
          const reference = createKvView(SHAPE);
          scatterSlots(reference, asPageId(page), firstSlot, numSlots, payload);
          const cuts = [...new Set(rawCuts.map((c) => c % payload.length))].sort((a, b) => a - b);
          const points = [0, ...cuts.filter((c) => c > 0), payload.length];
          const pieces = points.slice(1).map((end, i) => [points[i] as number, end] as const);
          const view = createKvView(SHAPE);
          for (const [from, to] of reversed ? pieces.reverse() : pieces)
            scatterSlotsPiece(view, asPageId(page), firstSlot, numSlots, from, payload.subarray(from, to));
          expect(view.data).toEqual(reference.data);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('at every single byte boundary of a partial range that crosses runs', () => {
    const payload = payloadOf(slotRangeBytes(SHAPE, 2));
    const reference = createKvView(SHAPE);
    scatterSlots(reference, asPageId(2), 1, 2, payload);
    for (let cut = 1; cut < payload.length; cut++) {
      const view = createKvView(SHAPE);
      scatterSlotsPiece(view, asPageId(2), 1, 2, 0, payload.subarray(0, cut));
      scatterSlotsPiece(view, asPageId(2), 1, 2, cut, payload.subarray(cut));
      expect(view.data).toEqual(reference.data);
    }
  });

  it('writes nothing outside the piece: the rest of the range keeps what it held', () => {
    const view = indexedPool();
    const before = view.data.slice();
    const payload = payloadOf(slotRangeBytes(SHAPE, 3));
    scatterSlotsPiece(view, asPageId(1), 1, 3, 50, payload.subarray(50, 51));
    const changed = [...view.data.keys()].filter((i) => view.data[i] !== before[i]);
    // Byte 50 of the payload: run 0 (layer 0, K) is 3 slots * 6 floats * 4 bytes = 72 bytes,
    // so it is float 12 of that run: slot 1 + 2 = 3, element 0, of page 1.
    expect(changed).toEqual([(((1 * SHAPE.numLayers + 0) * 2 + 0) * SHAPE.pageSize + 3) * KV_DIM + 0]);
  });

  it('refuses a piece that runs past the payload, or a range outside the page', () => {
    const view = createKvView(SHAPE);
    expect(() => scatterSlotsPiece(view, asPageId(0), 0, 1, 140, new Uint8Array(5))).toThrow(
      /piece \[140, 145\) lies outside a payload of 144 bytes/,
    );
    expect(() => scatterSlotsPiece(view, asPageId(0), 0, 1, -1, new Uint8Array(1))).toThrow(InvariantError);
    expect(() => scatterSlotsPiece(view, asPageId(0), 3, 2, 0, new Uint8Array(1))).toThrow(InvariantError);
    expect(view.data.every((x) => x === 0)).toBe(true);
  });
});

describe('kv layout of an f16 pool', () => {
  const F16: KvShape = { ...SHAPE, dtype: 'f16' };

  it('halves the bytes of a page and of a slot range; elements per page stay the same', () => {
    expect(elementsPerPage(F16)).toBe(elementsPerPage(SHAPE));
    expect(slotRangeBytes(F16, 2)).toBe(slotRangeBytes(SHAPE, 2) / 2);
    expect(createKvView(F16).data).toBeInstanceOf(Uint16Array);
  });

  it('gathers and scatters 16-bit elements in the same layer, K/V, slot order', () => {
    const view = createKvView(F16);
    view.data.forEach((_, i) => (view.data[i] = i));
    const bytes = gatherSlots(view, asPageId(2), 1, 2);
    expect([...new Uint16Array(bytes.slice().buffer)]).toEqual(referenceGather(view, 2, 1, 2));
    const target = createKvView(F16);
    scatterSlots(target, asPageId(4), 1, 2, bytes);
    expect(referenceGather(target, 4, 1, 2)).toEqual(referenceGather(view, 2, 1, 2));
    scatterSlotsPiece(target, asPageId(3), 1, 2, 5, bytes.subarray(5, 17));
    expect(new Uint8Array(gatherSlots(target, asPageId(3), 1, 2)).subarray(5, 17)).toEqual(bytes.subarray(5, 17));
  });

  it('refuses storage of the other element type', () => {
    expect(() => createKvView(F16, new Float32Array(elementsPerPage(F16) * 5))).toThrow(/Uint16Array/);
    expect(() => createKvView(SHAPE, new Uint16Array(elementsPerPage(SHAPE) * 5))).toThrow(/Float32Array/);
  });
});
