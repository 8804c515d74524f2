// The forward pass with one attention call per layer (layer-attention.ts: the native ops'
// attendLayer, and siluMulRows over fused gate | up rows) gives the bits of the per-sequence calls:
// logits and every KV slot, on a step of decodes and prefill chunks, q4_0 and f32 weights; and the
// one-call path really ran (its calls counted), so the equality is not the old path's twice.
import { describe, expect, it } from 'vitest';
import {
  createKernels,
  detectKernelSupport,
  nativeAvailability,
  planKernels,
  type OpKernels,
} from '../../kernels/index.js';
import { ropeTable, type ModelConfig } from '../../formats/index.js';
import { PRESET_CONFIGS, randomModel } from '../../gen/index.js';
import { allocateActivations } from '../activations.js';
import { allocKvView } from '../engine.js';
import { prepareWeights } from '../weights-prepared.js';
import { forward, type ForwardSeq } from './llama.js';

/** Every element's bits equal (a NaN too). */
function expectBitwiseEqual(what: string, actual: Float32Array, expected: Float32Array, length: number): void {
  const a = new Uint32Array(actual.buffer, actual.byteOffset, length);
  const e = new Uint32Array(expected.buffer, expected.byteOffset, length);
  const first = a.findIndex((bits, i) => bits !== e[i]);
  expect(first, `${what}: element ${first} differs`).toBe(-1);
}

const CONFIG: ModelConfig = {
  ...PRESET_CONFIGS.tiny,
  vocabSize: 300,
  hiddenSize: 128,
  intermediateSize: 192,
  numLayers: 2,
  numHeads: 6,
  numKvHeads: 2,
  headDim: 32,
};
const PAGE = 16;
/** Start position and tokens of each sequence: decodes beside prefill chunks. */
const SEQS = [
  { startPos: 40, numTokens: 1 },
  { startPos: 0, numTokens: 19 },
  { startPos: 17, numTokens: 1 },
  { startPos: 16, numTokens: 9 },
];

/** Logits and the KV pool after two steps (prompt chunks, then the step above) with or without the one-call path. */
async function run(
  dtype: 'q4_0' | 'f32',
  oneCall: boolean,
): Promise<{ logits: Float32Array; kv: Float32Array; calls: number }> {
  const model = randomModel(CONFIG, 5, dtype);
  const { dense, ops: base } = await createKernels(planKernels('auto', false, detectKernelSupport()), 2);
  try {
    let calls = 0;
    // The kernels themselves, one method counted (oneCall) or both one-call methods hidden.
    const ops: OpKernels = base;
    const own = ops as { -readonly [K in keyof OpKernels]: OpKernels[K] };
    if (oneCall) {
      const attendLayer = base.attendLayer!.bind(base);
      own.attendLayer = (...args) => {
        calls++;
        attendLayer(...args);
      };
    } else Object.assign(own, { attendLayer: undefined, siluMulRows: undefined });
    const weights = await prepareWeights(CONFIG, model.tensors, dense, ops, {});
    const pagesEach = 4;
    const kv = allocKvView(ops, {
      numPages: SEQS.length * pagesEach,
      pageSize: PAGE,
      numLayers: CONFIG.numLayers,
      numKvHeads: CONFIG.numKvHeads,
      headDim: CONFIG.headDim,
      dtype: 'f32',
    });
    const act = allocateActivations(
      CONFIG,
      128,
      8,
      (n) => new Float32Array(n),
      (n) => ops.allocF32(n),
    );
    const m = { config: CONFIG, weights, rope: ropeTable(CONFIG), dense, ops, kv };
    const table = (i: number) =>
      Int32Array.from({ length: pagesEach }, (_, p) => (pagesEach - 1 - p) * SEQS.length + i);
    let logits = new Float32Array(0);
    // Step 1: each sequence's positions before its start (the past it attends over); step 2: the step above.
    for (const step of [SEQS.map((s) => ({ startPos: 0, numTokens: s.startPos })), SEQS]) {
      const seqs: ForwardSeq[] = [];
      let row = 0;
      step.forEach((s, i) => {
        if (s.numTokens === 0) return;
        for (let t = 0; t < s.numTokens; t++) {
          act.tokens[row + t] = (7 * (row + t) + 3 * i + s.startPos) % CONFIG.vocabSize;
          act.positions[row + t] = s.startPos + t;
        }
        seqs.push({ row, numTokens: s.numTokens, startPos: s.startPos, pageTable: table(i), rope: null });
        row += s.numTokens;
      });
      const out = await forward(m, { numTokens: row, seqs, logitRows: seqs.map((s) => s.row + s.numTokens - 1) }, act);
      logits = out.slice();
    }
    return { logits, kv: (kv.data as Float32Array).slice(), calls };
  } finally {
    await dense.dispose();
  }
}

describe.skipIf(!('addon' in nativeAvailability()))('forward with one attention call per layer', () => {
  for (const dtype of ['q4_0', 'f32'] as const)
    it(`gives the per-sequence calls' logits and KV bits (${dtype} weights)`, async () => {
      const before = await run(dtype, false);
      const after = await run(dtype, true);
      expect(before.calls).toBe(0);
      expect(after.calls).toBe(2 * CONFIG.numLayers);
      expect(before.logits.every(Number.isFinite)).toBe(true);
      expectBitwiseEqual('logits', after.logits, before.logits, before.logits.length);
      expectBitwiseEqual('KV pool', after.kv, before.kv, before.kv.length);
    });
});
