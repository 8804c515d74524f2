// Parse a GGUF v2/v3 file held in memory (read, or mapped: files.ts): metadata, tensor infos and the data section.
// Every read is bounds-checked, so a corrupt or truncated file gives one ModelLoadError naming
// the file, what was being read and where, never a RangeError from inside a DataView.
// It hands out zero-copy views of tensor bytes; it must never copy or convert tensor data.
import { ModelLoadError } from '../core/index.js';
import { fileBytesOf, type FileBytes } from './files.js';
import {
  GGML_BLOCK,
  GGML_MAX_DIMS,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_SCALAR_TYPES,
  GGUF_TYPE_CODE,
  alignUp,
  ggmlTypeName,
  type GgufScalar,
  type GgufScalarType,
  type GgufValue,
} from './gguf-format.js';

export interface GgufTensorInfo {
  readonly name: string;
  readonly ggmlType: number;
  /** ne as in the file: ne[0] moves fastest. */
  readonly ne: readonly number[];
  /** Row-major shape (ne reversed): [rows = out, cols = in] for matrices, as Hugging Face. */
  readonly shape: readonly number[];
  /** Absolute offset of the first byte in the file. */
  readonly fileOffset: number;
  /** Size in bytes; null for GGML types whose block size Tessera does not know. */
  readonly byteLength: number | null;
}

export interface GgufFile {
  readonly file: string;
  readonly version: number;
  readonly alignment: number;
  readonly metadata: ReadonlyMap<string, GgufValue>;
  readonly tensors: readonly GgufTensorInfo[];
  readonly dataOffset: number;
  /** The whole file (a mapping's ArrayBuffer may be larger than one Uint8Array can view). */
  readonly bytes: FileBytes;
}

/** Smallest possible encodings, to reject absurd counts before looping over them. */
const MIN_KV_BYTES = 8 + 4 + 1;
const MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8;
const SCALAR_BYTES: Readonly<Record<GgufScalarType, number>> = {
  u8: 1,
  i8: 1,
  u16: 2,
  i16: 2,
  u32: 4,
  i32: 4,
  f32: 4,
  bool: 1,
  string: 8,
  u64: 8,
  i64: 8,
  f64: 8,
};

const SCALAR_BY_CODE: ReadonlyMap<number, GgufScalarType> = new Map(
  GGUF_SCALAR_TYPES.map((t) => [GGUF_TYPE_CODE[t], t]),
);

export function readGguf(source: Uint8Array | FileBytes, file: string): GgufFile {
  const bytes = source instanceof Uint8Array ? fileBytesOf(source) : source;
  // The header lies in the first 2 GiB (one view; a mapping's first piece holds at least that much).
  const c = new Cursor(bytes.view(0, Math.min(bytes.byteLength, 2 ** 31)), file);
  if (bytes.byteLength < 4 || c.u32('magic') !== GGUF_MAGIC) {
    const got = Buffer.from(bytes.view(0, Math.min(4, bytes.byteLength))).toString('latin1');
    throw new ModelLoadError(file, `not a GGUF file: bad magic ${JSON.stringify(got)} (expected "GGUF")`);
  }
  const version = c.u32('version');
  if (version !== 2 && version !== 3) {
    throw new ModelLoadError(file, `unsupported GGUF version ${version} (Tessera reads versions 2 and 3)`);
  }
  const tensorCount = c.count('tensor count', MIN_TENSOR_INFO_BYTES);
  const kvCount = c.count('metadata count', MIN_KV_BYTES);
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < kvCount; i++) {
    const key = c.string(`metadata key #${i}`);
    const type = c.u32(`type of ${key}`);
    metadata.set(key, c.value(type, key));
  }
  const alignment = readAlignment(metadata, file);
  const infos: { name: string; ggmlType: number; ne: number[]; offset: number }[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string(`tensor name #${i}`);
    const nDims = c.u32(`dimension count of ${name}`);
    if (nDims < 1 || nDims > GGML_MAX_DIMS)
      throw new ModelLoadError(file, `tensor ${name} has ${nDims} dimensions (1..${GGML_MAX_DIMS} allowed)`);
    const ne: number[] = [];
    for (let d = 0; d < nDims; d++) ne.push(c.u64Number(`ne[${d}] of ${name}`));
    const ggmlType = c.u32(`type of ${name}`);
    const offset = c.u64Number(`offset of ${name}`);
    infos.push({ name, ggmlType, ne, offset });
  }
  const dataOffset = alignUp(c.position, alignment);
  const seen = new Set<string>();
  const tensors = infos.map((info): GgufTensorInfo => {
    if (seen.has(info.name)) throw new ModelLoadError(file, `tensor ${info.name} appears twice`);
    seen.add(info.name);
    if (info.offset % alignment !== 0)
      throw new ModelLoadError(file, `tensor ${info.name} offset ${info.offset} is not aligned to ${alignment}`);
    const byteLength = tensorByteLength(info.ne, info.ggmlType, info.name, file);
    const fileOffset = dataOffset + info.offset;
    if (byteLength !== null && fileOffset + byteLength > bytes.byteLength) {
      throw new ModelLoadError(
        file,
        `truncated: tensor ${info.name} needs bytes ${fileOffset}..${fileOffset + byteLength} but the file has ${bytes.byteLength} bytes`,
      );
    }
    return {
      name: info.name,
      ggmlType: info.ggmlType,
      ne: info.ne,
      shape: [...info.ne].reverse(),
      fileOffset,
      byteLength,
    };
  });
  return { file, version, alignment, metadata, tensors, dataOffset, bytes };
}

/** The bytes of one tensor, zero-copy. */
export function ggufTensorBytes(gguf: GgufFile, info: GgufTensorInfo): Uint8Array {
  if (info.byteLength === null) {
    throw new ModelLoadError(
      gguf.file,
      `tensor ${info.name} has type ${ggmlTypeName(info.ggmlType)}, which Tessera cannot read`,
    );
  }
  if (info.byteLength > MAX_VIEW_BYTES) {
    throw new ModelLoadError(
      gguf.file,
      `tensor ${info.name} holds ${info.byteLength} bytes; Tessera views at most ${MAX_VIEW_BYTES} bytes per tensor`,
    );
  }
  return gguf.bytes.view(info.fileOffset, info.byteLength);
}

/** The most bytes one Uint8Array views in Node 20. */
const MAX_VIEW_BYTES = 2 ** 32 - 1;

function readAlignment(metadata: ReadonlyMap<string, GgufValue>, file: string): number {
  const v = metadata.get('general.alignment');
  if (v === undefined) return GGUF_DEFAULT_ALIGNMENT;
  if (v.type !== 'u32' || typeof v.value !== 'number' || v.value === 0 || (v.value & (v.value - 1)) !== 0) {
    throw new ModelLoadError(
      file,
      `general.alignment must be a power-of-two u32, got ${JSON.stringify(v.type === 'array' ? v.type : v.value)}`,
    );
  }
  return v.value;
}

function tensorByteLength(ne: readonly number[], ggmlType: number, name: string, file: string): number | null {
  const count = ne.reduce((a, b) => a * b, 1);
  if (!Number.isSafeInteger(count))
    throw new ModelLoadError(file, `tensor ${name} has an impossible shape [${ne.join(', ')}]`);
  const block = GGML_BLOCK[ggmlType];
  if (block === undefined) return null;
  const [perBlock, blockBytes] = block;
  if (ne[0]! % perBlock !== 0) {
    throw new ModelLoadError(
      file,
      `tensor ${name}: ne[0] = ${ne[0]} is not a multiple of the ${ggmlTypeName(ggmlType)} block size ${perBlock}`,
    );
  }
  return (count / perBlock) * blockBytes;
}

/** A bounds-checked little-endian reader. */
class Cursor {
  readonly #view: DataView;
  readonly #bytes: Uint8Array;
  readonly #file: string;
  position = 0;

  constructor(bytes: Uint8Array, file: string) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.#file = file;
  }

  #need(n: number, what: string): number {
    const at = this.position;
    if (at + n > this.#bytes.byteLength) {
      throw new ModelLoadError(
        this.#file,
        `truncated: ${what} at byte ${at} runs past the end of the file (${this.#bytes.byteLength} bytes)`,
      );
    }
    this.position += n;
    return at;
  }

  u32(what: string): number {
    return this.#view.getUint32(this.#need(4, what), true);
  }

  u64(what: string): bigint {
    return this.#view.getBigUint64(this.#need(8, what), true);
  }

  u64Number(what: string): number {
    const v = this.u64(what);
    if (v > BigInt(Number.MAX_SAFE_INTEGER))
      throw new ModelLoadError(this.#file, `${what} is ${v}, far beyond the file size`);
    return Number(v);
  }

  /** A u64 count of items at least `minBytes` each, checked against the bytes that remain. */
  count(what: string, minBytes: number): number {
    const at = this.position;
    const n = this.u64(what);
    const remaining = this.#bytes.byteLength - this.position;
    if (n * BigInt(minBytes) > BigInt(remaining)) {
      throw new ModelLoadError(
        this.#file,
        `corrupt header: ${what} at byte ${at} is ${n}, which needs at least ${n * BigInt(minBytes)} bytes, but only ${remaining} follow`,
      );
    }
    return Number(n);
  }

  string(what: string): string {
    const length = this.count(`length of ${what}`, 1);
    const at = this.#need(length, what);
    return Buffer.from(this.#bytes.buffer, this.#bytes.byteOffset + at, length).toString('utf8');
  }

  value(typeCode: number, key: string): GgufValue {
    if (typeCode === GGUF_TYPE_CODE.array) {
      const itemCode = this.u32(`item type of ${key}`);
      const itemType = this.#scalarType(itemCode, key, true);
      const minBytes = itemType === 'array' ? 12 : SCALAR_BYTES[itemType];
      const n = this.count(`item count of ${key}`, minBytes);
      if (itemType === 'array') {
        const items: GgufValue[] = [];
        for (let i = 0; i < n; i++) items.push(this.value(9, `${key}[${i}]`));
        return { type: 'array', itemType, items };
      }
      const items: GgufScalar[] = new Array<GgufScalar>(n);
      for (let i = 0; i < n; i++) items[i] = this.scalar(itemType, key);
      return { type: 'array', itemType, items };
    }
    const type = this.#scalarType(typeCode, key, false);
    if (type === 'array') throw new ModelLoadError(this.#file, `internal: array type for ${key}`);
    return { type, value: this.scalar(type, key) };
  }

  scalar(type: GgufScalarType, key: string): GgufScalar {
    const v = this.#view;
    switch (type) {
      case 'u8':
        return v.getUint8(this.#need(1, key));
      case 'i8':
        return v.getInt8(this.#need(1, key));
      case 'u16':
        return v.getUint16(this.#need(2, key), true);
      case 'i16':
        return v.getInt16(this.#need(2, key), true);
      case 'u32':
        return v.getUint32(this.#need(4, key), true);
      case 'i32':
        return v.getInt32(this.#need(4, key), true);
      case 'f32':
        return v.getFloat32(this.#need(4, key), true);
      case 'bool':
        return v.getUint8(this.#need(1, key)) !== 0;
      case 'string':
        return this.string(key);
      case 'u64':
        return v.getBigUint64(this.#need(8, key), true);
      case 'i64':
        return v.getBigInt64(this.#need(8, key), true);
      case 'f64':
        return v.getFloat64(this.#need(8, key), true);
    }
  }

  #scalarType(code: number, key: string, allowArray: boolean): GgufScalarType | 'array' {
    if (code === GGUF_TYPE_CODE.array && allowArray) return 'array';
    const type = SCALAR_BY_CODE.get(code);
    if (type === undefined)
      throw new ModelLoadError(this.#file, `corrupt header: metadata ${key} has unknown value type ${code}`);
    return type;
  }
}
