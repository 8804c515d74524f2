// Shape and layout checks shared by every backend: the page-major KV index (types.ts), weight
// tensor validation, and the argument checks that must hold before any kernel touches memory.
// Kernels never check page ownership (the caller did); they only refuse arguments that would
// read or write outside the buffers they were given. Never allocates or computes.
import { assert, kvRowUnits, type KvDtype } from '../core/index.js';
import { QK, byteSize } from './formats.js';
import { QK_K, isKQuant } from './kquants.js';
import type { AttentionArgs, HostTensor, PagedKvView, RopeArgs } from './types.js';

/**
 * Index of unit 0 of (page, layer, kv, slot) in PagedKvView.data; kv = 0 for K, 1 for V. Units:
 * elements of an f32 or f16 pool, bytes of a q8_0 pool (core's kvRowUnits per slot row).
 */
export function kvIndex(kv: PagedKvView, page: number, layer: number, which: 0 | 1, slot: number): number {
  return (((page * kv.numLayers + layer) * 2 + which) * kv.pageSize + slot) * kvRowUnits(kv);
}

/** Units (f32 or f16 elements, q8_0 bytes) one page takes across all layers, K and V. */
export function pageElements(
  kv: Pick<PagedKvView, 'numLayers' | 'pageSize' | 'numKvHeads' | 'headDim'> & { readonly dtype?: KvDtype },
): number {
  return kv.numLayers * 2 * kv.pageSize * kvRowUnits(kv);
}

export function checkWeight(weight: HostTensor): { rows: number; cols: number } {
  assert(
    weight.shape.length === 2,
    () => `${weight.name}: a dense weight must be 2-D, got [${weight.shape.join(', ')}]`,
  );
  const [rows, cols] = weight.shape as [number, number];
  assert(
    Number.isInteger(rows) && Number.isInteger(cols) && rows > 0 && cols > 0,
    () => `${weight.name}: bad shape [${rows}, ${cols}]`,
  );
  if (weight.dtype === 'q8_0' || weight.dtype === 'q4_0') {
    assert(cols % QK === 0, () => `${weight.name}: ${weight.dtype} needs cols % ${QK} === 0, got ${cols}`);
  }
  if (isKQuant(weight.dtype)) {
    assert(cols % QK_K === 0, () => `${weight.name}: ${weight.dtype} needs cols % ${QK_K} === 0, got ${cols}`);
  }
  const expected = byteSize(weight.dtype, rows * cols);
  assert(
    weight.data.byteLength === expected,
    () => `${weight.name}: ${weight.dtype} [${rows}, ${cols}] needs ${expected} bytes, got ${weight.data.byteLength}`,
  );
  return { rows, cols };
}

/** Each array must hold at least `length` elements. */
export function checkLengths(what: string, length: number, ...arrays: readonly { readonly length: number }[]): void {
  assert(Number.isInteger(length) && length >= 0, () => `${what}: bad length ${length}`);
  arrays.forEach((a, i) =>
    assert(a.length >= length, () => `${what}: argument ${i} has ${a.length} elements, needs ${length}`),
  );
}

export function checkMatmul(
  rows: number,
  cols: number,
  x: Float32Array,
  m: number,
  out: Float32Array | undefined,
): void {
  assert(Number.isInteger(m) && m >= 0, () => `matmul: bad m ${m}`);
  assert(x.length >= m * cols, () => `matmul: x has ${x.length} elements, needs ${m} x ${cols}`);
  if (out !== undefined)
    assert(out.length >= m * rows, () => `matmul: out has ${out.length} elements, needs ${m} x ${rows}`);
}

export function checkKvView(kv: PagedKvView): void {
  assert(
    kv.data.length >= kv.numPages * pageElements(kv),
    () => `KV view: ${kv.data.length} elements cannot hold ${kv.numPages} pages`,
  );
  assert(kv.pageSize > 0 && kv.numLayers > 0 && kv.numKvHeads > 0 && kv.headDim > 0, 'KV view: empty dimension');
}

/** Every position in [0, endPos) must map to a page of the pool through pageTable. */
export function checkPageTable(kv: PagedKvView, pageTable: Int32Array, endPos: number): void {
  const pagesNeeded = Math.ceil(endPos / kv.pageSize);
  assert(
    pageTable.length >= pagesNeeded,
    () => `page table has ${pageTable.length} pages, positions up to ${endPos} need ${pagesNeeded}`,
  );
  for (let i = 0; i < pagesNeeded; i++) {
    const page = pageTable[i]!;
    assert(
      Number.isInteger(page) && page >= 0 && page < kv.numPages,
      () => `page table entry ${i} = ${page} is outside the pool of ${kv.numPages} pages`,
    );
  }
}

export function checkWriteKv(
  kv: PagedKvView,
  layer: number,
  pageTable: Int32Array,
  startPos: number,
  numTokens: number,
  k: Float32Array,
  v: Float32Array,
): void {
  checkKvView(kv);
  assert(layer >= 0 && layer < kv.numLayers, () => `writeKv: layer ${layer} of ${kv.numLayers}`);
  assert(startPos >= 0 && numTokens >= 0, () => `writeKv: bad range ${startPos} + ${numTokens}`);
  const kvDim = kv.numKvHeads * kv.headDim;
  assert(
    k.length >= numTokens * kvDim && v.length >= numTokens * kvDim,
    () => `writeKv: k/v need ${numTokens} x ${kvDim} elements`,
  );
  checkPageTable(kv, pageTable, startPos + numTokens);
}

export function checkAttention(kv: PagedKvView, args: AttentionArgs): void {
  checkKvView(kv);
  const { shape, numTokens, startPos } = args;
  assert(args.layer >= 0 && args.layer < kv.numLayers, () => `attention: layer ${args.layer} of ${kv.numLayers}`);
  assert(
    shape.headDim === kv.headDim && shape.numKvHeads === kv.numKvHeads,
    'attention: shape does not match the KV view',
  );
  assert(
    shape.numHeads >= shape.numKvHeads && shape.numHeads > 0,
    () => `attention: ${shape.numHeads} heads, ${shape.numKvHeads} KV heads`,
  );
  assert(startPos >= 0 && numTokens >= 0, () => `attention: bad range ${startPos} + ${numTokens}`);
  const qDim = shape.numHeads * shape.headDim;
  assert(
    args.q.length >= numTokens * qDim && args.out.length >= numTokens * qDim,
    () => `attention: q/out need ${numTokens} x ${qDim} elements`,
  );
  assert(
    args.window === undefined || (Number.isSafeInteger(args.window) && args.window > 0),
    () => `attention: bad window ${args.window}`,
  );
  assert(
    args.sinks === undefined || args.sinks.length >= shape.numHeads,
    () => `attention: ${args.sinks?.length} sinks for ${shape.numHeads} heads`,
  );
  checkPageTable(kv, args.pageTable, startPos + numTokens);
}

export function checkRope(args: RopeArgs): void {
  const { numTokens, numHeads, headDim } = args;
  assert(headDim % 2 === 0, () => `rope: headDim ${headDim} must be even`);
  assert(args.invFreq.length >= headDim / 2, () => `rope: needs ${headDim / 2} inverse frequencies`);
  assert(args.positions.length >= numTokens, () => `rope: needs ${numTokens} positions`);
  assert(
    args.x.length >= numTokens * numHeads * headDim,
    () => `rope: x needs ${numTokens} x ${numHeads * headDim} elements`,
  );
}
