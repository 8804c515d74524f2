// Page and token arithmetic: how many bytes one token's KV takes, how many pages hold n tokens.
// Pure functions on numbers, shared by `tessera plan`, the start-up check and admission, so
// all three do the same sums. Must never round in the caller's favour: pages round up,
// pages that fit in memory round down.
import { assert } from '../core/index.js';

/** What one token's KV costs, summed over layers: K and V, numKvHeads * headDim each. */
export interface KvElementShape {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /**
   * 4 for f32, 2 for f16/bf16, 1.0625 for q8_0 (an f16 scale per 32 values; more when headDim is
   * not a multiple of 32): any positive number whose K-plus-V bytes per token per layer are whole.
   */
  readonly bytesPerElement: number;
}

function assertCount(value: number, what: string): void {
  assert(Number.isSafeInteger(value) && value >= 0, () => `${what} must be a non-negative integer, got ${value}`);
}

function assertPositive(value: number, what: string): void {
  assert(Number.isSafeInteger(value) && value > 0, () => `${what} must be a positive integer, got ${value}`);
}

/** Bytes of K plus V for one token in one layer: 2 * numKvHeads * headDim * bytesPerElement. */
export function kvBytesPerTokenPerLayer(shape: KvElementShape): number {
  assertPositive(shape.numKvHeads, 'numKvHeads');
  assertPositive(shape.headDim, 'headDim');
  const perElement = shape.bytesPerElement;
  assert(Number.isFinite(perElement) && perElement > 0, () => `bytesPerElement must be positive, got ${perElement}`);
  const bytes = 2 * shape.numKvHeads * shape.headDim * perElement;
  const whole = Math.round(bytes);
  assert(Math.abs(bytes - whole) < 1e-6, () => `K and V of one token in one layer must be whole bytes, got ${bytes}`);
  return whole;
}

/** Bytes of K plus V for one token across all layers. */
export function kvBytesPerToken(shape: KvElementShape): number {
  assertPositive(shape.numLayers, 'numLayers');
  return shape.numLayers * kvBytesPerTokenPerLayer(shape);
}

/** Bytes of one page: pageSize tokens' KV in every layer. */
export function kvBytesPerPage(shape: KvElementShape, pageSize: number): number {
  assertPositive(pageSize, 'pageSize');
  return pageSize * kvBytesPerToken(shape);
}

/** Pages needed to hold numTokens tokens (rounded up: a partial page is a whole page). */
export function pagesFor(numTokens: number, pageSize: number): number {
  assertCount(numTokens, 'numTokens');
  assertPositive(pageSize, 'pageSize');
  return Math.ceil(numTokens / pageSize);
}

/** Tokens that numPages pages hold. */
export function tokensIn(numPages: number, pageSize: number): number {
  assertCount(numPages, 'numPages');
  assertPositive(pageSize, 'pageSize');
  return numPages * pageSize;
}

/** Whole pages that fit in numBytes of memory (rounded down). */
export function pagesInBytes(numBytes: number, bytesPerPage: number): number {
  assertCount(numBytes, 'numBytes');
  assertPositive(bytesPerPage, 'bytesPerPage');
  return Math.floor(numBytes / bytesPerPage);
}
