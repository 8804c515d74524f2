// The safetensors format, read and written:
//
//   u64 N (little-endian) | N bytes of JSON header | data
//   header: { "<name>": { "dtype": "F32"|"F16"|"BF16", "shape": [...], "data_offsets": [begin, end] },
//             "__metadata__": { string: string } }      offsets relative to the start of data
//
// Reading hands out zero-copy views; every inconsistency (header past the end, offsets outside
// the data, a size that does not match dtype x shape) is a ModelLoadError naming the file.
// This file must never convert tensor data.
import { open } from 'node:fs/promises';
import { ModelLoadError, assert } from '../core/index.js';
import type { HostTensor, WeightDType } from '../kernels/index.js';
import { isJsonObject } from './json-fields.js';

const DTYPE_OF: Readonly<Record<string, WeightDType>> = { F32: 'f32', F16: 'f16', BF16: 'bf16' };
const NAME_OF: Readonly<Partial<Record<WeightDType, string>>> = { f32: 'F32', f16: 'F16', bf16: 'BF16' };
const BYTES_OF: Readonly<Partial<Record<WeightDType, number>>> = { f32: 4, f16: 2, bf16: 2 };

export interface SafetensorsFile {
  readonly file: string;
  readonly tensors: ReadonlyMap<string, HostTensor>;
  readonly metadata: Readonly<Record<string, string>>;
}

export function readSafetensors(bytes: Uint8Array, file: string): SafetensorsFile {
  if (bytes.byteLength < 8)
    throw new ModelLoadError(file, `truncated: ${bytes.byteLength} bytes, too short for a safetensors header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerBytes = view.getBigUint64(0, true);
  if (headerBytes > BigInt(bytes.byteLength - 8)) {
    throw new ModelLoadError(
      file,
      `truncated or corrupt: header claims ${headerBytes} bytes but the file has ${bytes.byteLength}`,
    );
  }
  const dataStart = 8 + Number(headerBytes);
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset + 8, Number(headerBytes)).toString('utf8'));
  } catch (error) {
    throw new ModelLoadError(file, 'corrupt safetensors header: not valid JSON', error);
  }
  if (!isJsonObject(header)) throw new ModelLoadError(file, 'corrupt safetensors header: not a JSON object');
  const dataBytes = bytes.byteLength - dataStart;
  const tensors = new Map<string, HostTensor>();
  let metadata: Record<string, string> = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      metadata = isJsonObject(entry) ? (entry as Record<string, string>) : {};
      continue;
    }
    const { dtype, shape, begin, end } = parseEntry(name, entry, file);
    const count = shape.reduce((a, b) => a * b, 1);
    if (end - begin !== count * BYTES_OF[dtype]!) {
      throw new ModelLoadError(
        file,
        `tensor ${name}: ${end - begin} bytes for ${dtype} [${shape.join(', ')}] (expected ${count * BYTES_OF[dtype]!})`,
      );
    }
    if (end > dataBytes) {
      throw new ModelLoadError(
        file,
        `truncated: tensor ${name} needs data bytes ${begin}..${end} but the file holds ${dataBytes} bytes of data`,
      );
    }
    tensors.set(name, { name, dtype, shape, data: bytes.subarray(dataStart + begin, dataStart + end) });
  }
  return { file, tensors, metadata };
}

function parseEntry(
  name: string,
  entry: unknown,
  file: string,
): { dtype: WeightDType; shape: number[]; begin: number; end: number } {
  if (!isJsonObject(entry)) throw new ModelLoadError(file, `corrupt header entry for ${name}`);
  const dtypeName = entry['dtype'];
  const dtype = typeof dtypeName === 'string' ? DTYPE_OF[dtypeName] : undefined;
  if (dtype === undefined) {
    throw new ModelLoadError(
      file,
      `tensor ${name} has dtype ${JSON.stringify(dtypeName)} (Tessera reads F32, F16, BF16)`,
    );
  }
  const shape = entry['shape'];
  const offsets = entry['data_offsets'];
  const isIntList = (v: unknown, n?: number): v is number[] =>
    Array.isArray(v) && (n === undefined || v.length === n) && v.every((x) => Number.isSafeInteger(x) && x >= 0);
  if (!isIntList(shape)) throw new ModelLoadError(file, `tensor ${name} has a bad shape ${JSON.stringify(shape)}`);
  if (!isIntList(offsets, 2) || offsets[1]! < offsets[0]!) {
    throw new ModelLoadError(file, `tensor ${name} has bad data_offsets ${JSON.stringify(offsets)}`);
  }
  return { dtype, shape, begin: offsets[0]!, end: offsets[1]! };
}

export interface SafetensorsSpec {
  readonly name: string;
  readonly dtype: WeightDType;
  readonly shape: readonly number[];
}

export interface SafetensorsLayout {
  readonly header: Uint8Array;
  readonly offsets: readonly number[];
  readonly byteLengths: readonly number[];
  readonly totalBytes: number;
}

/** Header bytes (padded with spaces to 8 bytes, so f32 data stays aligned) and data offsets. */
export function layoutSafetensors(
  specs: readonly SafetensorsSpec[],
  metadata: Readonly<Record<string, string>> = {},
): SafetensorsLayout {
  const header: Record<string, unknown> = { __metadata__: metadata };
  const offsets: number[] = [];
  const byteLengths: number[] = [];
  let at = 0;
  for (const spec of specs) {
    const bytesPer = BYTES_OF[spec.dtype];
    assert(bytesPer !== undefined, `safetensors cannot hold ${spec.dtype} (F32, F16, BF16 only)`);
    const byteLength = spec.shape.reduce((a, b) => a * b, 1) * bytesPer;
    header[spec.name] = { dtype: NAME_OF[spec.dtype], shape: spec.shape, data_offsets: [at, at + byteLength] };
    offsets.push(at);
    byteLengths.push(byteLength);
    at += byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const jsonBytes = Buffer.from(json, 'utf8');
  const out = new Uint8Array(8 + jsonBytes.byteLength);
  new DataView(out.buffer).setBigUint64(0, BigInt(jsonBytes.byteLength), true);
  out.set(jsonBytes, 8);
  return { header: out, offsets, byteLengths, totalBytes: out.byteLength + at };
}

export function encodeSafetensors(
  tensors: readonly HostTensor[],
  metadata: Readonly<Record<string, string>> = {},
): Uint8Array {
  const layout = layoutSafetensors(tensors, metadata);
  const out = new Uint8Array(layout.totalBytes);
  out.set(layout.header, 0);
  tensors.forEach((t, i) => {
    assert(t.data.byteLength === layout.byteLengths[i], `${t.name}: wrong byte length`);
    out.set(t.data, layout.header.byteLength + layout.offsets[i]!);
  });
  return out;
}

/** Stream a safetensors file: `dataOf(i)` is called once per tensor, in order. */
export async function writeSafetensorsFile(
  path: string,
  specs: readonly SafetensorsSpec[],
  dataOf: (index: number) => Uint8Array | Promise<Uint8Array>,
  metadata: Readonly<Record<string, string>> = {},
): Promise<void> {
  const layout = layoutSafetensors(specs, metadata);
  const handle = await open(path, 'w');
  try {
    await handle.write(layout.header, 0, layout.header.byteLength, 0);
    for (let i = 0; i < specs.length; i++) {
      const data = await dataOf(i);
      assert(
        data.byteLength === layout.byteLengths[i],
        `${specs[i]!.name}: ${data.byteLength} bytes given, ${layout.byteLengths[i]} expected`,
      );
      await handle.write(data, 0, data.byteLength, layout.header.byteLength + layout.offsets[i]!);
    }
  } finally {
    await handle.close();
  }
}
