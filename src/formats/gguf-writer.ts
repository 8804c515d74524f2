// Write GGUF v3 files (see gguf-format.ts for the layout): used by gen-model and by tests that
// need hand-made or deliberately corrupt files. The header is laid out first, so tensors can be
// streamed to disk one at a time. It must never reorder or change the bytes it is given.
import { open } from 'node:fs/promises';
import { assert } from '../core/index.js';
import {
  GGML_BLOCK,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_TYPE_CODE,
  alignUp,
  ggmlTypeName,
  type GgufScalar,
  type GgufScalarType,
  type GgufValue,
} from './gguf-format.js';

export interface GgufTensorSpec {
  readonly name: string;
  readonly ggmlType: number;
  /** Row-major shape [rows = out, cols = in]; written as ne = reversed shape. */
  readonly shape: readonly number[];
}

export interface GgufLayout {
  readonly header: Uint8Array;
  /** Offset of each tensor in the data section (relative to header.byteLength). */
  readonly offsets: readonly number[];
  readonly byteLengths: readonly number[];
  readonly totalBytes: number;
}

export function specByteLength(spec: GgufTensorSpec): number {
  const block = GGML_BLOCK[spec.ggmlType];
  assert(block !== undefined, `cannot write GGML type ${ggmlTypeName(spec.ggmlType)}`);
  const count = spec.shape.reduce((a, b) => a * b, 1);
  assert(count % block[0] === 0, `${spec.name}: ${count} weights is not a multiple of the block size ${block[0]}`);
  return (count / block[0]) * block[1];
}

/** Lay out a GGUF file: header bytes (padded to the alignment) and each tensor's offset. */
export function layoutGguf(
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensorSpec[],
): GgufLayout {
  const alignmentValue = metadata.find(([k]) => k === 'general.alignment')?.[1];
  const alignment =
    alignmentValue !== undefined && alignmentValue.type === 'u32'
      ? Number(alignmentValue.value)
      : GGUF_DEFAULT_ALIGNMENT;
  const w = new ByteWriter();
  w.u32(GGUF_MAGIC);
  w.u32(3);
  w.u64(BigInt(tensors.length));
  w.u64(BigInt(metadata.length));
  for (const [key, value] of metadata) {
    w.string(key);
    w.value(value);
  }
  const offsets: number[] = [];
  const byteLengths: number[] = [];
  let offset = 0;
  for (const spec of tensors) {
    const byteLength = specByteLength(spec);
    w.string(spec.name);
    w.u32(spec.shape.length);
    for (const n of [...spec.shape].reverse()) w.u64(BigInt(n));
    w.u32(spec.ggmlType);
    w.u64(BigInt(offset));
    offsets.push(offset);
    byteLengths.push(byteLength);
    offset = alignUp(offset + byteLength, alignment);
  }
  const header = w.finish(alignment);
  return { header, offsets, byteLengths, totalBytes: header.byteLength + offset };
}

/** The whole file in memory (tests and small models). */
export function encodeGguf(
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: ReadonlyArray<GgufTensorSpec & { readonly data: Uint8Array }>,
): Uint8Array {
  const layout = layoutGguf(metadata, tensors);
  const out = new Uint8Array(layout.totalBytes);
  out.set(layout.header, 0);
  tensors.forEach((t, i) => {
    assert(
      t.data.byteLength === layout.byteLengths[i],
      `${t.name}: ${t.data.byteLength} bytes given, ${layout.byteLengths[i]} expected`,
    );
    out.set(t.data, layout.header.byteLength + layout.offsets[i]!);
  });
  return out;
}

/** Stream a GGUF file to `path`: `dataOf(i)` is called once per tensor, in order. */
export async function writeGgufFile(
  path: string,
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensorSpec[],
  dataOf: (index: number) => Uint8Array | Promise<Uint8Array>,
): Promise<void> {
  const layout = layoutGguf(metadata, tensors);
  const handle = await open(path, 'w');
  try {
    await handle.write(layout.header, 0, layout.header.byteLength, 0);
    for (let i = 0; i < tensors.length; i++) {
      const data = await dataOf(i);
      assert(
        data.byteLength === layout.byteLengths[i],
        `${tensors[i]!.name}: ${data.byteLength} bytes given, ${layout.byteLengths[i]} expected`,
      );
      await handle.write(data, 0, data.byteLength, layout.header.byteLength + layout.offsets[i]!);
    }
    await handle.truncate(layout.totalBytes);
  } finally {
    await handle.close();
  }
}

/** Shorthands for metadata values. */
export const gguf = {
  str: (value: string): GgufValue => ({ type: 'string', value }),
  u32: (value: number): GgufValue => ({ type: 'u32', value }),
  i32: (value: number): GgufValue => ({ type: 'i32', value }),
  f32: (value: number): GgufValue => ({ type: 'f32', value }),
  bool: (value: boolean): GgufValue => ({ type: 'bool', value }),
  strings: (items: readonly string[]): GgufValue => ({ type: 'array', itemType: 'string', items }),
  f32s: (items: readonly number[]): GgufValue => ({ type: 'array', itemType: 'f32', items }),
  i32s: (items: readonly number[]): GgufValue => ({ type: 'array', itemType: 'i32', items }),
};

class ByteWriter {
  #buf = new Uint8Array(1 << 16);
  #view = new DataView(this.#buf.buffer);
  #at = 0;

  #reserve(n: number): number {
    if (this.#at + n > this.#buf.byteLength) {
      const bigger = new Uint8Array(Math.max(this.#buf.byteLength * 2, this.#at + n));
      bigger.set(this.#buf.subarray(0, this.#at));
      this.#buf = bigger;
      this.#view = new DataView(bigger.buffer);
    }
    const at = this.#at;
    this.#at += n;
    return at;
  }

  u32(v: number): void {
    const at = this.#reserve(4); // before reading #view: reserving may replace it
    this.#view.setUint32(at, v, true);
  }

  u64(v: bigint): void {
    const at = this.#reserve(8);
    this.#view.setBigUint64(at, v, true);
  }

  string(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(BigInt(bytes.byteLength));
    const at = this.#reserve(bytes.byteLength);
    this.#buf.set(bytes, at);
  }

  value(v: GgufValue): void {
    this.u32(GGUF_TYPE_CODE[v.type]);
    if (v.type !== 'array') {
      this.scalar(v.type, v.value);
      return;
    }
    this.u32(GGUF_TYPE_CODE[v.itemType]);
    this.u64(BigInt(v.items.length));
    if (v.itemType === 'array') {
      for (const item of v.items as readonly GgufValue[]) this.#arrayBody(item);
    } else {
      for (const item of v.items as readonly GgufScalar[]) this.scalar(v.itemType, item);
    }
  }

  /** A nested array item: no type code of its own beyond its item type. */
  #arrayBody(v: GgufValue): void {
    assert(v.type === 'array', 'items of an array of arrays must be arrays');
    this.u32(GGUF_TYPE_CODE[v.itemType]);
    this.u64(BigInt(v.items.length));
    if (v.itemType === 'array') for (const item of v.items as readonly GgufValue[]) this.#arrayBody(item);
    else for (const item of v.items as readonly GgufScalar[]) this.scalar(v.itemType, item);
  }

  scalar(type: GgufScalarType, v: GgufScalar): void {
    const d = (): DataView => this.#view;
    switch (type) {
      case 'u8': {
        const at = this.#reserve(1);
        d().setUint8(at, Number(v));
        return;
      }
      case 'i8': {
        const at = this.#reserve(1);
        d().setInt8(at, Number(v));
        return;
      }
      case 'u16': {
        const at = this.#reserve(2);
        d().setUint16(at, Number(v), true);
        return;
      }
      case 'i16': {
        const at = this.#reserve(2);
        d().setInt16(at, Number(v), true);
        return;
      }
      case 'u32': {
        const at = this.#reserve(4);
        d().setUint32(at, Number(v), true);
        return;
      }
      case 'i32': {
        const at = this.#reserve(4);
        d().setInt32(at, Number(v), true);
        return;
      }
      case 'f32': {
        const at = this.#reserve(4);
        d().setFloat32(at, Number(v), true);
        return;
      }
      case 'bool': {
        const at = this.#reserve(1);
        d().setUint8(at, v ? 1 : 0);
        return;
      }
      case 'string':
        this.string(String(v));
        return;
      case 'u64': {
        const at = this.#reserve(8);
        d().setBigUint64(at, BigInt(v), true);
        return;
      }
      case 'i64': {
        const at = this.#reserve(8);
        d().setBigInt64(at, BigInt(v), true);
        return;
      }
      case 'f64': {
        const at = this.#reserve(8);
        d().setFloat64(at, Number(v), true);
        return;
      }
    }
  }

  finish(alignment: number): Uint8Array {
    const end = alignUp(this.#at, alignment);
    this.#reserve(end - this.#at);
    return this.#buf.slice(0, end);
  }
}
