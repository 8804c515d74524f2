// A minimal protobuf encoder for ONNX's ModelProto: just the fields Tessera's one-node dense
// graphs need (graph, nodes, attributes, initializers with raw_data, inputs/outputs with a
// symbolic batch dimension, opset imports). Field numbers follow onnx/onnx.proto. Encodes
// only; never parses or validates ONNX semantics (onnxruntime does that at session creation).
import { assert } from '../../core/index.js';

/** ONNX TensorProto.DataType values used here. */
export const OnnxDataType = { FLOAT: 1, UINT8: 2, INT8: 3, INT64: 7, FLOAT16: 10 } as const;

export interface OnnxTensor {
  readonly name: string;
  readonly dataType: number;
  readonly dims: readonly number[];
  readonly raw: Uint8Array;
}

export type OnnxAttribute =
  | { readonly kind: 'int'; readonly name: string; readonly value: number }
  | { readonly kind: 'float'; readonly name: string; readonly value: number }
  | { readonly kind: 'ints'; readonly name: string; readonly value: readonly number[] };

export interface OnnxNode {
  readonly opType: string;
  readonly domain?: string;
  readonly name: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly attributes?: readonly OnnxAttribute[];
}

/** A graph input or output: element type and dims, a string dim being symbolic (e.g. 'm'). */
export interface OnnxValueInfo {
  readonly name: string;
  readonly dataType: number;
  readonly dims: readonly (number | string)[];
}

export interface OnnxModel {
  readonly irVersion: number;
  readonly opsets: readonly { readonly domain: string; readonly version: number }[];
  readonly graphName: string;
  readonly nodes: readonly OnnxNode[];
  readonly initializers: readonly OnnxTensor[];
  readonly inputs: readonly OnnxValueInfo[];
  readonly outputs: readonly OnnxValueInfo[];
}

/** Protobuf wire-format writer: varints, length-delimited fields, fixed32. */
class Writer {
  readonly #chunks: Uint8Array[] = [];
  #length = 0;

  get length(): number {
    return this.#length;
  }

  bytes(data: Uint8Array): this {
    this.#chunks.push(data);
    this.#length += data.byteLength;
    return this;
  }

  varint(value: number): this {
    // Non-negative integers up to 2^53 (dims, enums); negative ints are never written here.
    const out: number[] = [];
    let v = value;
    while (v >= 0x80) {
      out.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    out.push(v);
    return this.bytes(Uint8Array.from(out));
  }

  tag(field: number, wireType: 0 | 2 | 5): this {
    return this.varint(field * 8 + wireType);
  }

  uint(field: number, value: number): this {
    return this.tag(field, 0).varint(value);
  }

  float(field: number, value: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, value, true);
    return this.tag(field, 5).bytes(b);
  }

  string(field: number, value: string): this {
    return this.blob(field, new TextEncoder().encode(value));
  }

  blob(field: number, data: Uint8Array): this {
    return this.tag(field, 2).varint(data.byteLength).bytes(data);
  }

  message(field: number, inner: Writer): this {
    this.tag(field, 2).varint(inner.length);
    for (const chunk of inner.#chunks) this.bytes(chunk);
    return this;
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.#length);
    let at = 0;
    for (const chunk of this.#chunks) {
      out.set(chunk, at);
      at += chunk.byteLength;
    }
    return out;
  }
}

function tensor(t: OnnxTensor): Writer {
  const w = new Writer();
  for (const d of t.dims) w.uint(1, d); // dims
  return w.uint(2, t.dataType).string(8, t.name).blob(9, t.raw); // data_type, name, raw_data
}

function attribute(a: OnnxAttribute): Writer {
  const w = new Writer().string(1, a.name);
  switch (a.kind) {
    case 'float':
      return w.float(2, a.value).uint(20, 1); // f, type = FLOAT
    case 'int':
      assertNonNegative(a.value);
      return w.uint(3, a.value).uint(20, 2); // i, type = INT
    case 'ints':
      for (const v of a.value) {
        assertNonNegative(v);
        w.uint(8, v); // ints
      }
      return w.uint(20, 7); // type = INTS
  }
}

function node(n: OnnxNode): Writer {
  const w = new Writer();
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  w.string(3, n.name).string(4, n.opType);
  for (const a of n.attributes ?? []) w.message(5, attribute(a));
  if (n.domain !== undefined) w.string(7, n.domain);
  return w;
}

function valueInfo(v: OnnxValueInfo): Writer {
  const shape = new Writer();
  for (const d of v.dims) shape.message(1, typeof d === 'string' ? new Writer().string(2, d) : new Writer().uint(1, d)); // dim_param / dim_value
  const tensorType = new Writer().uint(1, v.dataType).message(2, shape); // elem_type, shape
  return new Writer().string(1, v.name).message(2, new Writer().message(1, tensorType)); // name, type.tensor_type
}

export function encodeModel(model: OnnxModel): Uint8Array {
  const graph = new Writer();
  for (const n of model.nodes) graph.message(1, node(n));
  graph.string(2, model.graphName);
  for (const t of model.initializers) graph.message(5, tensor(t));
  for (const i of model.inputs) graph.message(11, valueInfo(i));
  for (const o of model.outputs) graph.message(12, valueInfo(o));
  const w = new Writer().uint(1, model.irVersion).string(2, 'tessera'); // ir_version, producer_name
  w.message(7, graph);
  for (const o of model.opsets) w.message(8, new Writer().string(1, o.domain).uint(2, o.version));
  return w.finish();
}

function assertNonNegative(v: number): void {
  assert(Number.isInteger(v) && v >= 0, () => `onnx-proto: only non-negative integer attributes are encoded, got ${v}`);
}
