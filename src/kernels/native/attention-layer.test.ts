// The addon's one-call layer attention (attention-layer.c, NativeAttentionOps.attendLayer) gives
// exactly the bits of the calls it replaces: RoPE of q and k (the wasm kernel), writeKv and the
// addon's attention per sequence, over a step of decodes and prefill chunks whose pages are
// interleaved in one pool, with the helper threads and without, every variant this CPU runs, GQA
// ratios that divide evenly and not; and it refuses (nothing written) a page outside the pool, a
// page table too short for its positions, and rows outside the step.
import { beforeAll, describe, expect, it } from 'vitest';
import { Rng, type PagedKvView } from '../../core/index.js';
import { expectBitwiseEqual, randomF32 } from '../cases/support.js';
import type { LayerAttentionArgs } from '../types.js';
import { WasmOps } from '../wasm/ops.js';
import { WasmRuntime } from '../wasm/runtime.js';
import { NativeDense, nativeVariantsHere, selectNativeVariant } from './native.js';
import { NativeAttentionOps } from './native-ops.js';

let runtime: WasmRuntime;
beforeAll(async () => {
  runtime = await WasmRuntime.load({ maxMemoryBytes: 256 * 1024 ** 2 });
  new NativeDense({ threads: 2, spinMicros: 50 }); // the process's helper thread
});

const PAGE = 16;
const LAYERS = 2;
const LAYER = 1;
/** Each sequence: start position and tokens (decodes and prefill chunks, ends mid-page). */
const SEQS = [
  { startPos: 140, numTokens: 1 },
  { startPos: 0, numTokens: 21 },
  { startPos: 63, numTokens: 1 },
  { startPos: 32, numTokens: 16 },
  { startPos: 7, numTokens: 1 },
];

interface Step {
  readonly kv: PagedKvView & { dtype: 'f32' };
  readonly qkv: Float32Array;
  readonly positions: Int32Array;
  readonly tables: Int32Array[];
  readonly rows: number[];
  readonly T: number;
}

function makeStep(rng: Rng, numHeads: number, numKvHeads: number, headDim: number): Step {
  const kvDim = numKvHeads * headDim;
  const pagesEach = SEQS.map((s) => Math.ceil((s.startPos + s.numTokens) / PAGE));
  const numPages = pagesEach.reduce((a, b) => a + b, 0) + 2;
  // Pages handed out backwards, so every sequence's pages are scattered through the pool.
  let next = numPages - 1;
  const tables = pagesEach.map((n) => Int32Array.from({ length: n }, () => next--));
  const data = randomF32(rng, numPages * LAYERS * 2 * PAGE * kvDim);
  const kv = { numPages, pageSize: PAGE, numLayers: LAYERS, numKvHeads, headDim, dtype: 'f32' as const, data };
  const rows: number[] = [];
  let T = 0;
  for (const s of SEQS) {
    rows.push(T);
    T += s.numTokens;
  }
  const positions = new Int32Array(T);
  SEQS.forEach((s, i) => {
    for (let t = 0; t < s.numTokens; t++) positions[rows[i]! + t] = s.startPos + t;
  });
  return { kv, qkv: randomF32(rng, T * (numHeads * headDim + 2 * kvDim)), positions, tables, rows, T };
}

const invFreqOf = (headDim: number) =>
  Float32Array.from({ length: headDim / 2 }, (_, i) => Math.pow(10000, (-2 * i) / headDim));

/** The per-sequence calls forward/llama.ts made before: split, RoPE, writeKv, attention. */
function perSequence(ops: NativeAttentionOps, step: Step, numHeads: number): Float32Array {
  const { kv, T } = step;
  const { numKvHeads, headDim } = kv;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const width = qDim + 2 * kvDim;
  const q = new Float32Array(T * qDim);
  const k = new Float32Array(T * kvDim);
  const v = new Float32Array(T * kvDim);
  for (let t = 0; t < T; t++) {
    q.set(step.qkv.subarray(t * width, t * width + qDim), t * qDim);
    k.set(step.qkv.subarray(t * width + qDim, t * width + qDim + kvDim), t * kvDim);
    v.set(step.qkv.subarray(t * width + qDim + kvDim, (t + 1) * width), t * kvDim);
  }
  const rope = { numTokens: T, headDim, positions: step.positions, invFreq: invFreqOf(headDim), attentionFactor: 1 };
  ops.rope({ ...rope, x: q, numHeads });
  ops.rope({ ...rope, x: k, numHeads: numKvHeads });
  const out = new Float32Array(T * qDim).fill(Number.NaN);
  SEQS.forEach((s, i) => {
    const r0 = step.rows[i]!;
    const rows = (buf: Float32Array, w: number) => buf.subarray(r0 * w, (r0 + s.numTokens) * w);
    ops.writeKv(kv, LAYER, step.tables[i]!, s.startPos, s.numTokens, rows(k, kvDim), rows(v, kvDim));
    ops.attention(kv, {
      layer: LAYER,
      shape: { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) },
      q: rows(q, qDim),
      out: rows(out, qDim),
      numTokens: s.numTokens,
      startPos: s.startPos,
      pageTable: step.tables[i]!,
    });
  });
  return out;
}

/** attendLayer's arguments for the step (the cos | sin table as forward/layer-attention.ts makes it). */
function layerArgs(ops: NativeAttentionOps, step: Step, numHeads: number, tables = step.tables): LayerAttentionArgs {
  const { kv, T } = step;
  const { numKvHeads, headDim } = kv;
  const cosSin = new Float32Array(T * headDim);
  for (let t = 0; t < T; t++) cosSin.fill(1, t * headDim, t * headDim + headDim / 2);
  ops.rope({
    x: cosSin,
    numTokens: T,
    numHeads: 1,
    headDim,
    positions: step.positions,
    invFreq: invFreqOf(headDim),
    attentionFactor: 1,
  });
  const seqs = new Int32Array(4 * SEQS.length);
  let offset = 0;
  SEQS.forEach((s, i) => {
    seqs.set([step.rows[i]!, s.numTokens, s.startPos, offset], 4 * i);
    offset += tables[i]!.length;
  });
  const pageTables = new Int32Array(offset);
  tables.reduce((at, t) => (pageTables.set(t, at), at + t.length), 0);
  return {
    layer: LAYER,
    shape: { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) },
    qkv: step.qkv,
    numTokens: T,
    cosSin,
    seqs,
    numSeqs: SEQS.length,
    pageTables,
    q: new Float32Array(T * numHeads * headDim),
    out: new Float32Array(T * numHeads * headDim).fill(Number.NaN),
  };
}

const SHAPES = [
  { numHeads: 12, numKvHeads: 4, headDim: 64 }, // m100
  { numHeads: 8, numKvHeads: 8, headDim: 48 }, // MHA, a head size not a power of two
  { numHeads: 5, numKvHeads: 2, headDim: 32 }, // uneven groups
];

for (const variant of nativeVariantsHere())
  describe(`attendLayer (${variant})`, () => {
    beforeAll(() => void selectNativeVariant(variant));

    for (const shape of SHAPES)
      for (const threads of [1, 2])
        it(`gives the per-sequence calls' bits: ${JSON.stringify(shape)}, ${threads} thread(s)`, () => {
          const ops = new NativeAttentionOps(new WasmOps(runtime), { threads });
          const { numHeads, numKvHeads, headDim } = shape;
          const before = makeStep(new Rng(11), numHeads, numKvHeads, headDim);
          const after = makeStep(new Rng(11), numHeads, numKvHeads, headDim);
          const expected = perSequence(ops, before, numHeads);
          const args = layerArgs(ops, after, numHeads);
          ops.attendLayer(after.kv, args);
          const length = before.T * numHeads * headDim;
          expect(expected.every(Number.isFinite)).toBe(true);
          expectBitwiseEqual('attention output', args.out, expected, length);
          expectBitwiseEqual('the KV pool', after.kv.data, before.kv.data, before.kv.data.length);
        });

    it('refuses a page outside the pool, a short page table and rows outside the step, with nothing written', () => {
      const ops = new NativeAttentionOps(new WasmOps(runtime), { threads: 2 });
      const step = makeStep(new Rng(3), 12, 4, 64);
      const pool = step.kv.data.slice();
      const good = layerArgs(ops, step, 12);
      const untouched = (args: LayerAttentionArgs) => {
        expect(args.out.every(Number.isNaN)).toBe(true);
        expect(args.q.every((x) => x === 0)).toBe(true);
        expectBitwiseEqual('the KV pool', step.kv.data, pool, pool.length);
      };
      const outside = step.tables.map((t, i) =>
        i === 3 ? Int32Array.from(t, (p, j) => (j === 1 ? step.kv.numPages : p)) : t,
      );
      const bad = layerArgs(ops, step, 12, outside);
      expect(() => ops.attendLayer(step.kv, bad)).toThrow(/outside the pool/);
      untouched(bad);
      const short = layerArgs(ops, step, 12);
      const seqs = short.seqs.slice();
      seqs[4 * 4 + 3] = short.pageTables.length; // the last sequence's table starts past the end
      expect(() => ops.attendLayer(step.kv, { ...short, seqs })).toThrow(/too short/);
      untouched(short);
      const rows = layerArgs(ops, step, 12);
      const beyond = rows.seqs.slice();
      beyond[4 * 1 + 1] = step.T; // the second sequence runs past the step's rows
      expect(() => ops.attendLayer(step.kv, { ...rows, seqs: beyond })).toThrow(/outside the step/);
      untouched(rows);
      // The good call on the same pool writes and attends.
      ops.attendLayer(step.kv, good);
      expect(good.out.every(Number.isFinite)).toBe(true);
    });
  });
