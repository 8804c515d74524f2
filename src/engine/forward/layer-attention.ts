// A step's attention in one native call per layer (OpKernels.attendLayer, attention-layer.c): RoPE
// of q and k, the step's K and V into the pages and every sequence's attention, instead of two
// RoPE calls, and a KV write and an attention call per sequence, in each layer. A serving step of
// 16 decodes made 16 attention calls per layer, each its own hand-off to the helper threads for 4
// (token, KV head) items; here the layer's items are one job. The same bits: the cos | sin table is
// the rope kernel's own (computed once per step by running it on rows of ones and zeros, whose
// rotation is exactly cos | sin), and the native call repeats the rope kernel's arithmetic and
// runs attention.c's kernel on each item.
//
// Used only where it computes exactly what the per-sequence calls would: kernels that have it, an
// f32 pool, one RoPE table for every sequence (no dynamic NTK), no window or sinks (gpt-oss), and,
// per layer, fused q | k | v rows with no bias and no q / k norm (planLayer's caller checks those).
import type { AttentionArgs, AttentionShape, LayerAttentionArgs, OpKernels, PagedKvView } from '../../kernels/index.js';
import type { ModelConfig, RopeTable } from '../../formats/index.js';
import type { Activations } from '../activations.js';

/** What it reads of forward/llama.ts's ForwardModel and ForwardBatch (structurally: no import cycle). */
interface StepModel {
  readonly config: ModelConfig;
  readonly rope: RopeTable;
  readonly ops: OpKernels;
  readonly kv: PagedKvView;
}
interface StepBatch {
  readonly numTokens: number;
  readonly seqs: readonly {
    readonly row: number;
    readonly numTokens: number;
    readonly startPos: number;
    readonly pageTable: Int32Array;
    readonly rope: RopeTable | null;
  }[];
}

/** The step's arguments to attendLayer, all but the layer; null where the per-sequence calls must run. */
export type LayerAttentionPlan = Omit<LayerAttentionArgs, 'layer'>;

/** Each activations' concatenated page tables, grown when a step needs more. */
const tablesOf = new WeakMap<Activations, Int32Array>();

export function planLayerAttention(m: StepModel, batch: StepBatch, a: Activations): LayerAttentionPlan | null {
  const { config, ops, kv } = m;
  if (ops.attendLayer === undefined || kv.dtype !== 'f32' || config.gptOss !== undefined) return null;
  if (batch.seqs.some((s) => s.rope !== null)) return null;
  const { numHeads, numKvHeads, headDim } = config;
  const T = batch.numTokens;
  // The page tables, one after the other, and each sequence's row in layerSeqs.
  let numPages = 0;
  for (const s of batch.seqs) numPages += s.pageTable.length;
  let tables = tablesOf.get(a);
  if (tables === undefined || tables.length < numPages) {
    tables = new Int32Array(Math.max(numPages, 2 * (tables?.length ?? 0), 256));
    tablesOf.set(a, tables);
  }
  let offset = 0;
  batch.seqs.forEach((s, i) => {
    a.layerSeqs[4 * i] = s.row;
    a.layerSeqs[4 * i + 1] = s.numTokens;
    a.layerSeqs[4 * i + 2] = s.startPos;
    a.layerSeqs[4 * i + 3] = offset;
    tables.set(s.pageTable, offset);
    offset += s.pageTable.length;
  });
  // cos | sin per token: the rope kernel rotating (1, .., 1 | 0, .., 0) gives exactly (cos | sin).
  const half = headDim / 2;
  const cosSin = a.cosSin.subarray(0, T * headDim);
  for (let t = 0; t < T; t++) {
    cosSin.fill(1, t * headDim, t * headDim + half);
    cosSin.fill(0, t * headDim + half, (t + 1) * headDim);
  }
  const { invFreq, attentionFactor } = m.rope;
  ops.rope({ x: cosSin, numTokens: T, numHeads: 1, headDim, positions: a.positions, invFreq, attentionFactor });
  return {
    shape: { numHeads, numKvHeads, headDim, scale: 1 / Math.sqrt(headDim) },
    qkv: a.qkv,
    numTokens: T,
    cosSin,
    seqs: a.layerSeqs,
    numSeqs: batch.seqs.length,
    pageTables: tables.subarray(0, numPages),
    q: a.q,
    out: a.att,
  };
}

/**
 * The per-sequence path (where planLayerAttention says null, and Gemma 3): each sequence's K / V rows
 * of this step into its pages first, so attention reads them like the past, then its attention.
 * q, k, v: the step's rotated rows; out: [T, qDim], written. `extra`: a window and / or sinks.
 */
export function attendEachSequence(
  m: Pick<StepModel, 'ops' | 'kv'>,
  batch: StepBatch,
  layer: number,
  shape: AttentionShape,
  rowsOf: { q: Float32Array; k: Float32Array; v: Float32Array; out: Float32Array },
  extra: Pick<AttentionArgs, 'window' | 'sinks'>,
): void {
  const { ops, kv } = m;
  const qDim = shape.numHeads * shape.headDim;
  const kvDim = shape.numKvHeads * shape.headDim;
  for (const s of batch.seqs) {
    const rows = (buf: Float32Array, width: number) => buf.subarray(s.row * width, (s.row + s.numTokens) * width);
    ops.writeKv(kv, layer, s.pageTable, s.startPos, s.numTokens, rows(rowsOf.k, kvDim), rows(rowsOf.v, kvDim));
    ops.attention(kv, {
      layer,
      shape,
      q: rows(rowsOf.q, qDim),
      out: rows(rowsOf.out, qDim),
      numTokens: s.numTokens,
      startPos: s.startPos,
      pageTable: s.pageTable,
      ...extra,
    });
  }
}
