// The shared case suite of OpKernels: every backend runs these (see its *.test.ts) against
// RefOps, the oracle. Tolerance: |y - y_ref| <= 1e-5 * (|y_ref| + 1) for attention and RoPE,
// 1e-5 * |y_ref| + 1e-6 for RMSNorm, SiLU·mul and GELU·mul (f32 sums and a polynomial exp stay far
// inside it); KV writes and adds are exact. KV pools are poisoned with NaN everywhere except the
// slots written for the request, so a kernel that reads a page outside the page table, a slot
// past the causal limit (or before a sliding window) or another layer produces NaN and fails the
// comparison. Attention and writeKv run over both KV dtypes: an f16 pool is poisoned with the
// f16 NaN 0x7e00, and its K and V are rounded to f16 on write by both sides, so the oracle sees
// the same inputs. A q8_0 pool is poisoned with bytes 0x7e (every block's scale the f16 NaN
// 0x7e7e) and written by q8-kv.ts's quantizeKvRow in every backend, so the oracle reads the same
// bytes; the fast kernels sum d * qs in another order (per block), inside the same tolerance.
// row-cases.ts holds the row ops' cases (no KV pool), f16-cases.ts the f16 promotion cases.
import { KV_DTYPES, kvRowUnits, Rng, type KvDtype } from '../../core/index.js';
import { f16ToF32, f32ToF16, Float32Bits } from '../half.js';
import { pageElements } from '../layout.js';
import { dequantizeKvRow, quantizeKvRow } from '../q8-kv.js';
import { RefOps } from '../ref/ops.js';
import type { AttentionShape, OpKernels, PagedKvView } from '../types.js';
import { OPS_RELATIVE_TOLERANCE, rowCases } from './row-cases.js';
import { type KernelCase, expectBitwiseEqual, expectThrows, expectWithin, randomF32 } from './support.js';

interface AttentionSetup {
  readonly label: string;
  readonly shape: AttentionShape;
  readonly pageSize: number;
  readonly numPages: number;
  readonly pageTable: readonly number[];
  readonly startPos: number;
  readonly numTokens: number;
  /** A sliding window (Gemma 3's local layers); undefined: full causal attention. */
  readonly window?: number;
  /** gpt-oss's attention sinks, one logit per query head; undefined: none. */
  readonly sinks?: Float32Array;
}

function setup(
  label: string,
  numHeads: number,
  numKvHeads: number,
  headDim: number,
  pageSize: number,
  pageTable: number[],
  startPos: number,
  numTokens: number,
  window?: number,
): AttentionSetup {
  const shape = { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
  const base = { label, shape, pageSize, numPages: Math.max(...pageTable) + 3, pageTable, startPos, numTokens };
  return window === undefined ? base : { ...base, window };
}

const PAGES_20 = Array.from({ length: 20 }, (_, i) => (i * 7 + 3) % 23);
const ATTENTION_SETUPS: readonly AttentionSetup[] = [
  setup('prefill, MHA, partly filled last page', 4, 4, 8, 4, [5, 2, 9], 0, 10),
  setup('decode, GQA 8/2, startPos 37', 8, 2, 16, 16, [3, 0, 6], 37, 1),
  setup('chunk across pages, GQA 6/3, headDim 6', 6, 3, 6, 5, [7, 1, 4, 2], 11, 6),
  setup('chunk, GQA 12/4, headDim 64', 12, 4, 64, 16, [9, 3, 7, 1, 5], 60, 10),
  setup('one slot per page, 3 heads on 1 KV head', 3, 1, 4, 1, [4, 0, 3, 1, 2], 0, 5),
  setup('window 7: decode, window starts mid-page', 4, 2, 8, 4, [6, 1, 8, 3, 0], 17, 1, 7),
  setup('window 4 = page size: prefill from 0 across pages', 4, 1, 16, 4, [2, 5, 0, 7], 0, 13, 4),
  setup('window 5: chunk, GQA 6/3, headDim 6', 6, 3, 6, 5, [7, 1, 4, 2], 11, 6, 5),
  setup('decode, headDim 256 (Gemma 3), GQA 4/1', 4, 1, 256, 8, [3, 0, 5, 2], 29, 1),
  setup('decode at position 300 of 20 scattered pages, GQA 12/4, headDim 64', 12, 4, 64, 16, PAGES_20, 300, 1),
  withSinks(setup('sinks (gpt-oss): chunk, GQA 8/2, window 7', 8, 2, 16, 4, [6, 1, 8, 3, 0, 2], 9, 6, 7)),
  withSinks(setup('sinks (gpt-oss): decode, GQA 4/1, headDim 64, full', 4, 1, 64, 16, [3, 0, 5], 40, 1)),
];

/** The setup with one sink logit per head, spread over [-3, 3) (scores here have unit spread): each moves its head's output. */
function withSinks(s: AttentionSetup): AttentionSetup {
  const sinks = Float32Array.from({ length: s.shape.numHeads }, (_, h) => -3 + (6 * h) / s.shape.numHeads);
  return { ...s, sinks };
}
const NUM_LAYERS = 2;
const LAYER = 1;

/** The f16 bit pattern the f16 pools are poisoned with: a quiet NaN. */
export const F16_NAN = 0x7e00;

/** A pool of numPages pages of `geometry` from backend's memory, every element NaN. */
export function poisonedPool(
  backend: OpKernels,
  dtype: KvDtype,
  geometry: Omit<PagedKvView, 'data' | 'dtype' | 'numPages'>,
  numPages: number,
): PagedKvView {
  const length = numPages * pageElements({ ...geometry, dtype });
  switch (dtype) {
    case 'f16':
      return { ...geometry, numPages, dtype, data: backend.allocU16(length).fill(F16_NAN) };
    case 'q8_0':
      return { ...geometry, numPages, dtype, data: backend.allocU8(length).fill(Q8_POISON) };
    case 'f32':
      return { ...geometry, numPages, dtype, data: backend.allocF32(length).fill(NaN) };
  }
}

/** The byte q8_0 pools are poisoned with: every block's scale reads 0x7e7e, an f16 NaN. */
export const Q8_POISON = 0x7e;

/**
 * The pool's values as f32, in the element order of an f32 pool of the same geometry (f16
 * promoted exactly, q8_0 dequantized: d * qs).
 */
export function poolValues(kv: PagedKvView): Float32Array {
  if (kv.dtype === 'f16') return Float32Array.from(kv.data, f16ToF32);
  if (kv.dtype === 'f32') return kv.data;
  const rowUnits = kvRowUnits(kv);
  const kvDim = kv.numKvHeads * kv.headDim;
  const rows = kv.data.length / rowUnits;
  const out = new Float32Array(rows * kvDim);
  for (let r = 0; r < rows; r++) dequantizeKvRow(kv.data, r * rowUnits, kv.numKvHeads, kv.headDim, out, r * kvDim);
  return out;
}

/** What a pool of `dtype` reads back for the head row x (headDim values): x rounded to it. */
export function storedRow(dtype: KvDtype, x: Float32Array): Float32Array {
  if (dtype === 'f32') return x;
  if (dtype === 'f16') return x.map((value) => f16ToF32(f32ToF16(value)));
  const bytes = new Uint8Array(x.length + 2 * Math.ceil(x.length / 32));
  quantizeKvRow(x, 0, 1, x.length, bytes, 0, new Float32Bits());
  const out = new Float32Array(x.length);
  dequantizeKvRow(bytes, 0, 1, x.length, out, 0);
  return out;
}

/** A NaN-poisoned pool for `s`, with K and V written for positions [0, startPos + numTokens) of LAYER. */
function filledPool(backend: OpKernels, s: AttentionSetup, seed: number, dtype: KvDtype = 'f32'): PagedKvView {
  const geometry = {
    numLayers: NUM_LAYERS,
    pageSize: s.pageSize,
    numKvHeads: s.shape.numKvHeads,
    headDim: s.shape.headDim,
  };
  const kv = poisonedPool(backend, dtype, geometry, s.numPages);
  const endPos = s.startPos + s.numTokens;
  const kvDim = s.shape.numKvHeads * s.shape.headDim;
  const rng = new Rng(seed);
  backend.writeKv(
    kv,
    LAYER,
    Int32Array.from(s.pageTable),
    0,
    endPos,
    randomF32(rng, endPos * kvDim),
    randomF32(rng, endPos * kvDim),
  );
  // With a window, the positions no query of the call may see stay NaN: a kernel that reads one fails.
  const unseen = s.window === undefined ? 0 : Math.max(0, s.startPos + 1 - s.window);
  const nan = new Float32Array(unseen * kvDim).fill(NaN);
  if (unseen > 0) backend.writeKv(kv, LAYER, Int32Array.from(s.pageTable), 0, unseen, nan, nan);
  return kv;
}

function runAttention(
  backend: OpKernels,
  kv: PagedKvView,
  s: AttentionSetup,
  q: Float32Array,
  startPos: number,
  numTokens: number,
): Float32Array {
  const out = new Float32Array(numTokens * s.shape.numHeads * s.shape.headDim);
  backend.attention(kv, {
    layer: LAYER,
    shape: s.shape,
    q,
    out,
    numTokens,
    startPos,
    pageTable: Int32Array.from(s.pageTable),
    ...(s.window === undefined ? {} : { window: s.window }),
    ...(s.sinks === undefined ? {} : { sinks: s.sinks }),
  });
  return out;
}

function attentionCases(): KernelCase<OpKernels>[] {
  return KV_DTYPES.flatMap((dtype) => attentionCasesOf(dtype));
}

function attentionCasesOf(dtype: KvDtype): KernelCase<OpKernels>[] {
  const over = dtype === 'f32' ? '' : `, ${dtype} KV`;
  return ATTENTION_SETUPS.flatMap((s, n): KernelCase<OpKernels>[] => {
    const qDim = s.shape.numHeads * s.shape.headDim;
    const q = randomF32(new Rng(400 + n), s.numTokens * qDim);
    return [
      {
        name: `attention (${s.label}${over}) matches the reference and reads only the request's written slots`,
        run(backend) {
          const ref = new RefOps();
          const expected = runAttention(ref, filledPool(ref, s, 300 + n, dtype), s, q, s.startPos, s.numTokens);
          const actual = runAttention(backend, filledPool(backend, s, 300 + n, dtype), s, q, s.startPos, s.numTokens);
          expectWithin(
            `attention ${s.label}`,
            actual,
            expected,
            actual.length,
            (i) => OPS_RELATIVE_TOLERANCE * (Math.abs(expected[i]!) + 1),
          );
        },
      },
      {
        name: `attention (${s.label}${over}): a token's output does not depend on how many tokens share the call`,
        run(backend) {
          const kv = filledPool(backend, s, 300 + n, dtype);
          const together = runAttention(backend, kv, s, q, s.startPos, s.numTokens);
          for (let t = 0; t < s.numTokens; t++) {
            const alone = runAttention(backend, kv, s, q.subarray(t * qDim, (t + 1) * qDim), s.startPos + t, 1);
            expectBitwiseEqual(`token ${t}`, alone, together.subarray(t * qDim), qDim);
          }
        },
      },
    ];
  });
}

/** Sinks join each head's softmax: a dominant sink takes (nearly) all the weight, so the output shrinks to ~0. */
function sinkCases(): KernelCase<OpKernels>[] {
  const s = ATTENTION_SETUPS.find((x) => x.sinks !== undefined)!;
  return [
    {
      name: 'attention sinks: a dominant sink drives every output to 0, a very negative one changes nothing',
      run(backend) {
        const qDim = s.shape.numHeads * s.shape.headDim;
        const q = randomF32(new Rng(410), s.numTokens * qDim);
        const kv = filledPool(backend, s, 310);
        const none = runAttention(backend, kv, { ...s, sinks: undefined }, q, s.startPos, s.numTokens);
        const faint = runAttention(backend, kv, { ...s, sinks: new Float32Array(8).fill(-80) }, q, s.startPos, 6);
        expectWithin('sinks -80', faint, none, none.length, (i) => OPS_RELATIVE_TOLERANCE * (Math.abs(none[i]!) + 1));
        const loud = runAttention(backend, kv, { ...s, sinks: new Float32Array(8).fill(60) }, q, s.startPos, 6);
        const zeros = new Float32Array(loud.length);
        expectWithin('sinks 60', loud, zeros, loud.length, () => 1e-12);
        const some = runAttention(backend, kv, s, q, s.startPos, s.numTokens);
        if (some.every((x, i) => Math.abs(x - none[i]!) < 1e-3)) throw new Error('the sinks moved no output');
      },
    },
  ];
}

function f16ReadCases(): KernelCase<OpKernels>[] {
  return [
    {
      name: 'attention over an f16 pool promotes V exactly: subnormals, signed zeros, the largest half, inf and nan',
      run(backend) {
        const headDim = 64;
        const geometry = { numLayers: 1, pageSize: 4, numKvHeads: 1, headDim };
        const kv = poisonedPool(backend, 'f16', geometry, 2);
        if (kv.dtype !== 'f16') throw new Error('unreachable');
        const rng = new Rng(602);
        const special = [0x0001, 0x03ff, 0x0200, 0x8001, 0x83ff, 0x0000, 0x8000, 0x0400, 0x3c00, 0x7bff, 0xfbff];
        special.push(0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x3555);
        const v = Uint16Array.from({ length: headDim }, (_, i) => special[i] ?? rng.nextU32() & 0xffff);
        // One position: softmax gives it weight 1, so out = V exactly (K only needs to be finite).
        kv.data.fill(0x3c00, 0, headDim); // K of slot 0 of page 0: all ones
        kv.data.set(v, 4 * headDim); // V of slot 0 of page 0
        const out = new Float32Array(headDim);
        const shape = { numHeads: 1, numKvHeads: 1, headDim, scale: 1 / 8 };
        const q = new Float32Array(headDim).fill(0.5);
        backend.attention(kv, { layer: 0, shape, q, out, numTokens: 1, startPos: 0, pageTable: Int32Array.from([0]) });
        for (let i = 0; i < headDim; i++) {
          const want = f16ToF32(v[i]!);
          // -0 comes out as +0: the weighted sum starts from 0 (the same in every backend).
          const ok = Number.isNaN(want) ? Number.isNaN(out[i]!) : out[i] === want;
          if (!ok) throw new Error(`V element ${i} = half 0x${v[i]!.toString(16)}: got ${out[i]}, want ${want}`);
        }
      },
    },
  ];
}

function writeKvCases(): KernelCase<OpKernels>[] {
  return [
    ...KV_DTYPES.map((dtype): KernelCase<OpKernels> => ({
      name: `writeKv (${dtype} KV) writes exactly the slots of the given positions, through a scattered page table`,
      run(backend) {
        const geometry = { numLayers: 3, pageSize: 4, numKvHeads: 2, headDim: 3 };
        const numPages = 11;
        const pageTable = Int32Array.from([5, 2, 9]);
        const rng = new Rng(600);
        const k = randomF32(rng, 7 * 6);
        const v = randomF32(rng, 7 * 6);
        const ref = new RefOps();
        const expectedKv = poisonedPool(ref, dtype, geometry, numPages);
        ref.writeKv(expectedKv, 1, pageTable, 3, 7, k, v);
        const actualKv = poisonedPool(backend, dtype, geometry, numPages);
        backend.writeKv(actualKv, 1, pageTable, 3, 7, k, v);
        const [expected, actual] = [poolValues(expectedKv), poolValues(actualKv)];
        expectBitwiseEqual('pool after writeKv', actual, expected, expected.length);
        // Spot-check the layout itself: position 9 = page 9, slot 1; K of layer 1, KV head 1, element 2.
        const at = (((9 * 3 + 1) * 2 + 0) * 4 + 1) * 6 + 1 * 3 + 2;
        const stored = storedRow(dtype, k.slice((9 - 3) * 6 + 3, (9 - 3) * 6 + 6))[2];
        if (actual[at] !== stored) throw new Error('position 9 is not in page 9, slot 1');
        if (actual.filter((x) => !Number.isNaN(x)).length !== 2 * 7 * 6)
          throw new Error('writeKv wrote more than 7 tokens of K and V');
      },
    })),
    {
      name: 'writeKv into an f16 pool rounds to nearest even exactly as half.ts, incl. subnormals, overflow, inf and nan',
      run(backend) {
        const geometry = { numLayers: 1, pageSize: 1, numKvHeads: 1, headDim: 64 };
        const rng = new Rng(601);
        const bits = new Uint32Array(64 * 64);
        for (let i = 0; i < bits.length; i++) bits[i] = rng.nextU32();
        // Edges: ties (even and odd), the largest half and just past it, subnormals, zero, inf, nan.
        const edges = [0x3f801000, 0x3f803000, 0x477fe000, 0x477ff000, 0x477fefff, 0x33800000, 0x33000000];
        edges.push(0x337fffff, 0x38800000, 0x387fc000, 0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001);
        bits.set(edges);
        const values = new Float32Array(bits.buffer);
        const kv = poisonedPool(backend, 'f16', geometry, 64);
        if (kv.dtype !== 'f16') throw new Error('unreachable');
        backend.writeKv(
          kv,
          0,
          Int32Array.from({ length: 64 }, (_, i) => i),
          0,
          64,
          values,
          values,
        );
        for (let t = 0; t < 64; t++) {
          for (let i = 0; i < 64; i++) {
            const x = values[t * 64 + i]!;
            const want = f32ToF16(x);
            const got = kv.data[t * 2 * 64 + i]!;
            const same = got === want || (Number.isNaN(x) && (got & 0x7c00) === 0x7c00 && (got & 0x3ff) !== 0);
            if (!same)
              throw new Error(
                `f32 ${x} (bits ${bits[t * 64 + i]!.toString(16)}) -> ${got.toString(16)}, want ${want.toString(16)}`,
              );
          }
        }
      },
    },
  ];
}

function refusalCases(): KernelCase<OpKernels>[] {
  return [
    {
      name: 'refuses page tables that point outside the pool or do not cover the positions, and short arrays',
      async run(backend) {
        const s = ATTENTION_SETUPS[0]!;
        const kv = filledPool(backend, s, 700);
        const qDim = s.shape.numHeads * s.shape.headDim;
        const attend = (pageTable: number[], startPos: number, numTokens: number) => () =>
          backend.attention(kv, {
            layer: LAYER,
            shape: s.shape,
            q: new Float32Array(numTokens * qDim),
            out: new Float32Array(numTokens * qDim),
            numTokens,
            startPos,
            pageTable: Int32Array.from(pageTable),
          });
        await expectThrows('page id past the pool', attend([5, 2, s.numPages], 0, 10));
        await expectThrows('negative page id', attend([5, -1, 9], 0, 10));
        await expectThrows('page table shorter than the positions', attend([5, 2], 0, 10));
        await expectThrows('layer past the pool', () =>
          backend.attention(kv, {
            layer: NUM_LAYERS,
            shape: s.shape,
            q: new Float32Array(qDim),
            out: new Float32Array(qDim),
            numTokens: 1,
            startPos: 0,
            pageTable: Int32Array.from([5]),
          }),
        );
        const kvDim = s.shape.numKvHeads * s.shape.headDim;
        await expectThrows('writeKv past the page table', () =>
          backend.writeKv(
            kv,
            LAYER,
            Int32Array.from([5, 2, 9]),
            10,
            3,
            new Float32Array(3 * kvDim),
            new Float32Array(3 * kvDim),
          ),
        );
        await expectThrows('rmsNorm into a short out', () =>
          backend.rmsNorm(new Float32Array(8), new Float32Array(4), 1e-5, 2, 4, new Float32Array(7)),
        );
        await expectThrows('siluMul past its inputs', () =>
          backend.siluMul(new Float32Array(4), new Float32Array(3), new Float32Array(4), 4),
        );
      },
    },
  ];
}

export function opsCases(): KernelCase<OpKernels>[] {
  return [...rowCases(), ...writeKvCases(), ...attentionCases(), ...sinkCases(), ...f16ReadCases(), ...refusalCases()];
}
