// Fake but checkable KV: every slot's values are derived from (request, position), so a reader
// can tell whether the bytes in a page were written for it. Used by src/transfer's unit tests
// and by the transfer simulation. Tiny pools: 1 layer, 1 KV head of dim 2, pages of 4 slots, in
// either KV dtype (an f16 pool holds each value folded into a non-zero 16-bit element: the
// transfer moves elements as bytes and never does arithmetic on them).
import {
  asRequestId,
  asTenantId,
  NO_FAULTS,
  type FaultSet,
  type KvDtype,
  type RequestId,
  type Tag,
} from '../../../src/core/index.js';
import { kvOffset, PagePool, type KvShape, type Owner } from '../../../src/pages/index.js';

export const PAGE_SIZE = 4;
const NUM_LAYERS = 1;
const KV_DIM = 2;

export function shape(numPages: number, dtype: KvDtype = 'f32'): KvShape {
  return { numPages, pageSize: PAGE_SIZE, numLayers: NUM_LAYERS, numKvHeads: 1, headDim: KV_DIM, dtype };
}

export function makePool(numPages: number, faults: FaultSet = NO_FAULTS, dtype: KvDtype = 'f32'): PagePool {
  return PagePool.create(shape(numPages, dtype), faults);
}

/**
 * kvValue as a unit of a pool of `dtype`: itself in f32, folded into 1..0xffff in f16, into
 * 1..0xff in q8_0 (whose units are bytes: the sim writes the first KV_DIM bytes of each row as
 * opaque content, which is all a transfer moves and checks).
 */
function stored(dtype: KvDtype, value: number): number {
  if (dtype === 'q8_0') return ((value - 1) % 0xff) + 1;
  return dtype === 'f16' ? ((value - 1) % 0xffff) + 1 : value;
}

export function owner(rid: string, tenant = 't0'): Owner {
  return { rid: asRequestId(rid), tenant: asTenantId(tenant) };
}

function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The value of element i of (layer, kv) at position pos of request `key`: exact in f32 (< 2^24), never 0. */
export function kvValue(key: number, pos: number, layer: number, kv: number, i: number): number {
  let h =
    Math.imul(key ^ Math.imul(pos + 1, 0x9e3779b1), 0x85ebca6b) ^ Math.imul(layer * 4 + kv * 2 + i + 1, 0xc2b2ae35);
  h ^= h >>> 15;
  return ((h >>> 0) % 0xfffffe) + 1;
}

export function contentKey(rid: RequestId | string): number {
  return hash32(rid);
}

/** What a prefill compute does: positions [from, to) of rid's prompt into its pages, checked and stamped. */
export function writePositions(pool: PagePool, who: Owner, tags: readonly Tag[], from: number, to: number): void {
  const key = contentKey(who.rid);
  pool.checkWrite(who, tags.slice(Math.floor(from / PAGE_SIZE), Math.ceil(to / PAGE_SIZE)));
  for (let pos = from; pos < to; pos++) {
    const tag = tags[Math.floor(pos / PAGE_SIZE)] as Tag;
    const slot = pos % PAGE_SIZE;
    for (let layer = 0; layer < NUM_LAYERS; layer++) {
      for (const kv of [0, 1] as const) {
        const at = kvOffset(pool.kv, tag.page, layer, kv, slot);
        for (let i = 0; i < KV_DIM; i++) pool.kv.data[at + i] = stored(pool.kv.dtype, kvValue(key, pos, layer, kv, i));
      }
    }
    pool.stamp(tag, slot + 1);
  }
}

/**
 * The first position in [0, numTokens) whose bytes in `tags` were not written for `rid`, or -1.
 * Reads the pool directly (no ledger or stamp check): this is the ground truth a check must match.
 */
export function firstForeignPosition(
  pool: PagePool,
  rid: RequestId | string,
  tags: readonly Tag[],
  numTokens: number,
): number {
  const key = contentKey(rid);
  for (let pos = 0; pos < numTokens; pos++) {
    const tag = tags[Math.floor(pos / PAGE_SIZE)];
    if (tag === undefined) return pos;
    for (let layer = 0; layer < NUM_LAYERS; layer++) {
      for (const kv of [0, 1] as const) {
        const at = kvOffset(pool.kv, tag.page, layer, kv, pos % PAGE_SIZE);
        for (let i = 0; i < KV_DIM; i++)
          if (pool.kv.data[at + i] !== stored(pool.kv.dtype, kvValue(key, pos, layer, kv, i))) return pos;
      }
    }
  }
  return -1;
}

/** A token a decoder would produce from what it read: depends on every value of the prompt's KV. */
export function tokenFromPages(pool: PagePool, tags: readonly Tag[], numTokens: number, step: number): number {
  let h = 0x12345 + step;
  for (let pos = 0; pos < numTokens; pos++) {
    const tag = tags[Math.floor(pos / PAGE_SIZE)] as Tag;
    const at = kvOffset(pool.kv, tag.page, 0, 0, pos % PAGE_SIZE);
    h = Math.imul(h ^ (pool.kv.data[at] as number), 0x01000193) >>> 0;
  }
  return h % 32000;
}

/** The token tokenFromPages gives when the pages hold rid's own KV. */
export function expectedToken(
  rid: RequestId | string,
  numTokens: number,
  step: number,
  dtype: KvDtype = 'f32',
): number {
  const key = contentKey(rid);
  let h = 0x12345 + step;
  for (let pos = 0; pos < numTokens; pos++)
    h = Math.imul(h ^ stored(dtype, kvValue(key, pos, 0, 0, 0)), 0x01000193) >>> 0;
  return h % 32000;
}
