import { describe, expect, it } from 'vitest';
import { asPageId, InvariantError } from '../core/index.js';
import { createKvView, floatsPerPage, gatherSlots, scatterSlots, slotRangeBytes, type KvShape, type PagedKvView } from './kv-layout.js';

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
        for (let i = 0; i < KV_DIM; i++) out.push(view.data[(((page * view.numLayers + layer) * 2 + kv) * view.pageSize + slot) * KV_DIM + i] as number);
      }
    }
  }
  return out;
}

const asFloats = (bytes: Uint8Array): number[] => [...new Float32Array(bytes.slice().buffer)];

describe('kv layout', () => {
  it('sizes a page and a slot range', () => {
    expect(floatsPerPage(SHAPE)).toBe(3 * 2 * 4 * 6);
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
    const written = view.data.reduce((n, x) => n + (x !== 0 ? 1 : 0), 0);
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
