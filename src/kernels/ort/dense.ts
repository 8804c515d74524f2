// Dense matmul through onnxruntime-node: one session per weight matrix, built at prepare() from an
// ONNX model encoded in memory (onnx-proto.ts), with a symbolic batch dim m. Sessions are the
// package's native binding (onnxruntime-node/dist/binding.js, typed there), run synchronously:
// the public InferenceSession.run defers every call to setImmediate and re-checks feeds and
// wraps outputs in JS, ~4 µs a call, a few % of a batch-1 token at ~50 matmuls a token.
//   f32            Gemm(x, W, transB = 1)
//   f16, bf16      converted to f32 at load (2x the file's bytes in memory), then as f32
//   q4_0, q8_0     com.microsoft MatMulNBits, bits = 4 / 8, block_size = 32: weights stay 4/8-bit
//                  in memory (repack.ts). activationPrecision picks accuracy_level:
//                    'int8' (default) level 4: x quantized to int8 per block, integer dot products,
//                           as llama.cpp does for q4_0/q8_0 (~1e-3 of Σ|x·w| from exact; fast)
//                    'f32'  level 0: f32 arithmetic on the dequantized weights (exact to ~1e-7,
//                           but 2-3x slower for q4_0 and ~100x slower for q8_0 in ORT 1.30)
//   q4_k, q5_k,    MatMulNBits too (repack-k.ts: 4 / 8 / 8 bits), plus for q4_k and q5_k a small
//   q6_k           f32 product of per-block sums of x with the blocks' min terms
// Not batch-invariant: onnxruntime picks kernels by m, so a row's bits may change with the
// batch it is in (bench/kernels.ts measures it). Never used with --deterministic.
import ort from 'onnxruntime-node';
import { binding, initOrt, type Binding } from 'onnxruntime-node/dist/binding.js';
import { assert } from '../../core/index.js';
import { dequantize } from '../formats.js';
import { checkMatmul, checkWeight } from '../layout.js';
import type { DenseKernels, DenseWeight, HostTensor, WeightDType } from '../types.js';
import { OnnxDataType, type OnnxModel, type OnnxNode, type OnnxTensor, encodeModel } from './onnx-proto.js';
import { repackQ4_0, repackQ8_0 } from './repack.js';
import { repackK } from './repack-k.js';

export interface OrtDenseOptions {
  /** intra-op threads per session (default 1). */
  readonly threads?: number;
  /**
   * Let idle intra-op threads spin between runs (default false). Every session has its own
   * pool, so with one session per matrix spinning threads starve the running one: measured
   * 30-50x slower on 2 cores.
   */
  readonly spinning?: boolean;
  /** Arithmetic for q4_0/q8_0 weights (see above); default 'int8'. */
  readonly activationPrecision?: 'int8' | 'f32';
}

class OrtWeight implements DenseWeight {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly dtype: WeightDType,
    readonly session: Binding.InferenceSession,
  ) {}
}

const OPSETS = [
  { domain: '', version: 17 },
  { domain: 'com.microsoft', version: 1 },
];

function bytesOf(values: Float32Array | Uint8Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

/** The one-node graph y[m, rows] = x[m, cols] · Wᵀ for `weight`. */
export function denseModel(weight: HostTensor, activationPrecision: 'int8' | 'f32' = 'int8'): OnnxModel {
  const { rows, cols } = checkWeight(weight);
  let nodes: OnnxNode[];
  let initializers: OnnxTensor[];
  switch (weight.dtype) {
    case 'f32':
    case 'f16':
    case 'bf16': {
      const values = new Float32Array(rows * cols);
      dequantize(weight.dtype, weight.data, 0, rows * cols, values);
      initializers = [{ name: 'W', dataType: OnnxDataType.FLOAT, dims: [rows, cols], raw: bytesOf(values) }];
      nodes = [
        {
          opType: 'Gemm',
          name: 'dense',
          inputs: ['x', 'W'],
          outputs: ['y'],
          attributes: [{ kind: 'int', name: 'transB', value: 1 }],
        },
      ];
      break;
    }
    case 'q4_0':
    case 'q8_0': {
      const packed =
        weight.dtype === 'q4_0' ? repackQ4_0(weight.data, rows, cols) : repackQ8_0(weight.data, rows, cols);
      const blob = (32 * packed.bits) / 8;
      initializers = [
        { name: 'B', dataType: OnnxDataType.UINT8, dims: [rows, cols / 32, blob], raw: packed.blocks },
        { name: 'scales', dataType: OnnxDataType.FLOAT, dims: [(rows * cols) / 32], raw: bytesOf(packed.scales) },
      ];
      nodes = [
        {
          opType: 'MatMulNBits',
          domain: 'com.microsoft',
          name: 'dense',
          inputs: ['x', 'B', 'scales'],
          outputs: ['y'],
          attributes: [
            { kind: 'int', name: 'K', value: cols },
            { kind: 'int', name: 'N', value: rows },
            { kind: 'int', name: 'bits', value: packed.bits },
            { kind: 'int', name: 'block_size', value: 32 },
            { kind: 'int', name: 'accuracy_level', value: activationPrecision === 'int8' ? 4 : 0 },
          ],
        },
      ];
      break;
    }
    case 'q4_k':
    case 'q5_k':
    case 'q6_k':
      ({ nodes, initializers } = kQuantGraph(weight, rows, cols, activationPrecision));
      break;
  }
  return {
    irVersion: 8,
    opsets: OPSETS,
    graphName: weight.name,
    nodes,
    initializers,
    inputs: [{ name: 'x', dataType: OnnxDataType.FLOAT, dims: ['m', cols] }],
    outputs: [{ name: 'y', dataType: OnnxDataType.FLOAT, dims: ['m', rows] }],
  };
}

/** MatMulNBits on the repacked K-quant, plus y += blockSums(x) · Cᵀ where repack-k.ts needs it. */
function kQuantGraph(
  weight: HostTensor,
  rows: number,
  cols: number,
  activationPrecision: 'int8' | 'f32',
): { nodes: OnnxNode[]; initializers: OnnxTensor[] } {
  const packed = repackK(weight.dtype as 'q4_k' | 'q5_k' | 'q6_k', weight.data, rows, cols);
  const perBlock = cols / packed.blockSize;
  const initializers: OnnxTensor[] = [
    {
      name: 'B',
      dataType: OnnxDataType.UINT8,
      dims: [rows, perBlock, (packed.blockSize * packed.bits) / 8],
      raw: packed.blocks,
    },
    { name: 'scales', dataType: OnnxDataType.FLOAT, dims: [rows * perBlock], raw: bytesOf(packed.scales) },
  ];
  const main: OnnxNode = {
    opType: 'MatMulNBits',
    domain: 'com.microsoft',
    name: 'dense',
    inputs: ['x', 'B', 'scales'],
    outputs: [packed.correction === null ? 'y' : 'y0'],
    attributes: [
      { kind: 'int', name: 'K', value: cols },
      { kind: 'int', name: 'N', value: rows },
      { kind: 'int', name: 'bits', value: packed.bits },
      { kind: 'int', name: 'block_size', value: packed.blockSize },
      { kind: 'int', name: 'accuracy_level', value: activationPrecision === 'int8' ? 4 : 0 },
    ],
  };
  if (packed.correction === null) return { nodes: [main], initializers };
  const int64s = (values: readonly number[]): Uint8Array =>
    new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer);
  initializers.push(
    { name: 'C', dataType: OnnxDataType.FLOAT, dims: [rows, cols / 32], raw: bytesOf(packed.correction) },
    { name: 'blockShape', dataType: OnnxDataType.INT64, dims: [3], raw: int64s([-1, cols / 32, 32]) },
    { name: 'lastAxis', dataType: OnnxDataType.INT64, dims: [1], raw: int64s([2]) },
  );
  return {
    initializers,
    nodes: [
      main,
      { opType: 'Reshape', name: 'blocks', inputs: ['x', 'blockShape'], outputs: ['xb'] },
      {
        opType: 'ReduceSum',
        name: 'blockSums',
        inputs: ['xb', 'lastAxis'],
        outputs: ['xs'],
        attributes: [{ kind: 'int', name: 'keepdims', value: 0 }],
      },
      {
        opType: 'Gemm',
        name: 'mins',
        inputs: ['xs', 'C'],
        outputs: ['y1'],
        attributes: [{ kind: 'int', name: 'transB', value: 1 }],
      },
      { opType: 'Add', name: 'sum', inputs: ['y0', 'y1'], outputs: ['y'] },
    ],
  };
}

export class OrtDense implements DenseKernels {
  readonly name = 'ort' as const;
  readonly batchInvariant = false;
  readonly #options: ort.InferenceSession.SessionOptions;
  readonly #activationPrecision: 'int8' | 'f32';
  readonly #sessions = new Set<Binding.InferenceSession>();
  /** Run options for every call (none: the binding wants an object). */
  readonly #runOptions: ort.InferenceSession.RunOptions = {};
  /**
   * Where inputs from shared (wasm) memory are copied for onnxruntime, reused call after call: a
   * fresh copy per call is garbage that V8 counts as external memory, and external memory is
   * what triggers its full collections on the engine thread (onnxruntime-node also copies every
   * output into a new ArrayBuffer, 2.4 MB per m100 decode step at batch 6, measured; that part
   * is the binding's). Safe to reuse: the binding's run() is synchronous.
   */
  #staging = new Float32Array(0);

  constructor(options: OrtDenseOptions = {}) {
    const threads = options.threads ?? 1;
    assert(
      Number.isInteger(threads) && threads >= 1,
      () => `OrtDense: threads must be a positive integer, got ${threads}`,
    );
    this.#activationPrecision = options.activationPrecision ?? 'int8';
    this.#options = {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      extra: { session: { intra_op: { allow_spinning: options.spinning === true ? '1' : '0' } } },
    };
  }

  async prepare(weight: HostTensor): Promise<DenseWeight> {
    const { rows, cols } = checkWeight(weight);
    initOrt();
    const bytes = encodeModel(denseModel(weight, this.#activationPrecision));
    const session = new binding.InferenceSession();
    session.loadModel(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength, this.#options);
    this.#sessions.add(session);
    return new OrtWeight(rows, cols, weight.dtype, session);
  }

  async matmul(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Promise<Float32Array> {
    assert(
      weight instanceof OrtWeight && this.#sessions.has(weight.session),
      'OrtDense.matmul: weight was not prepared by this OrtDense',
    );
    const { rows, cols } = weight;
    checkMatmul(rows, cols, x, m, out);
    if (m === 0) return out ?? new Float32Array(0);
    // onnxruntime-node wants an ordinary ArrayBuffer: copy views of shared (wasm) memory.
    let input = x.subarray(0, m * cols);
    if (!(x.buffer instanceof ArrayBuffer)) {
      if (this.#staging.length < m * cols) this.#staging = new Float32Array(m * cols);
      input = this.#staging.subarray(0, m * cols);
      input.set(x.subarray(0, m * cols));
    }
    const feeds = { x: new ort.Tensor('float32', input, [m, cols]) };
    if (out !== undefined && out.buffer instanceof ArrayBuffer) {
      // onnxruntime writes straight into a preallocated output tensor.
      weight.session.run(
        feeds,
        { y: new ort.Tensor('float32', out.subarray(0, m * rows), [m, rows]) },
        this.#runOptions,
      );
      return out;
    }
    const y = (weight.session.run(feeds, { y: null }, this.#runOptions)['y'] as ort.Tensor).data as Float32Array;
    if (out === undefined) return y;
    out.set(y.subarray(0, m * rows));
    return out;
  }

  async dispose(): Promise<void> {
    const sessions = [...this.#sessions];
    this.#sessions.clear();
    for (const s of sessions) s.dispose();
  }
}
