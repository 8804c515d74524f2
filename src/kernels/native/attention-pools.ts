// Test-only set-up shared by the addon's attention tests (attention-group.test.ts,
// attention-threads.test.ts): a shape, a pool of random K and V in each KV dtype, and one call of
// the addon's attention on it. Never used by the engine; free of any test framework, as
// cases/support.ts is.
import { kvRowUnits, type KvDtype, type Rng } from '../../core/index.js';
import { randomF32 } from '../cases/support.js';
import { Float32Bits } from '../half.js';
import { quantizeKvRow } from '../q8-kv.js';
import { nativeAvailability, type Addon } from './native.js';

export interface AttentionShape {
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly startPos: number;
  readonly numTokens: number;
  readonly window: number;
}

export const NUM_LAYERS = 2;
export const PAGE_SIZE = 16;
/** The layer every call attends over: the second, so a missing layer offset reads the wrong rows. */
const LAYER = 1;

/** The loaded addon; throws with the reason where it does not load. */
export function addon(): Addon {
  const found = nativeAvailability();
  if (!('addon' in found)) throw new Error(found.why);
  return found.addon;
}

/** A pool of `pages` pages of random K and V, as `dtype` stores them. */
export function randomPool(
  rng: Rng,
  dtype: KvDtype,
  shape: AttentionShape,
  pages: number,
): Float32Array | Uint16Array | Uint8Array {
  const { numKvHeads, headDim } = shape;
  const rows = pages * NUM_LAYERS * 2 * PAGE_SIZE;
  const length = rows * numKvHeads * headDim;
  // f16: random halves in [-2, 2), their sign, exponent and mantissa drawn directly (fast).
  if (dtype === 'f16') return Uint16Array.from({ length }, () => (rng.nextU32() % 0x4000) | (rng.nextU32() & 0x8000));
  const values = randomF32(rng, length, 2);
  if (dtype === 'f32') return values;
  const bits = new Float32Bits();
  const rowBytes = kvRowUnits({ numKvHeads, headDim, dtype });
  const pool = new Uint8Array(rows * rowBytes);
  for (let r = 0; r < rows; r++)
    quantizeKvRow(values, r * numKvHeads * headDim, numKvHeads, headDim, pool, r * rowBytes, bits);
  return pool;
}

/**
 * The addon's attention of `numHeads` query heads (`query`: [numTokens, numHeads, headDim]) over
 * the pages of `pageTable`, no sinks, into a fresh NaN-filled output (a row it skips stays NaN).
 */
export function attendPaged(
  native: Addon,
  pool: Float32Array | Uint16Array | Uint8Array,
  shape: AttentionShape,
  pageTable: Int32Array,
  query: Float32Array,
  numHeads: number,
  helpers: 0 | 1,
): Float32Array {
  const { numKvHeads, headDim, startPos, numTokens, window } = shape;
  const out = new Float32Array(numTokens * numHeads * headDim).fill(Number.NaN);
  const scale = 1 / Math.sqrt(headDim);
  native.attention(
    pool,
    NUM_LAYERS,
    PAGE_SIZE,
    numKvHeads,
    headDim,
    LAYER,
    pageTable,
    query,
    out,
    numTokens,
    startPos,
    numHeads,
    scale,
    window,
    helpers,
    null,
  );
  return out;
}
