import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { quantize, type HostTensor } from '../kernels/index.js';
import { encodeSafetensors, readSafetensors } from './safetensors.js';

const FILE = '/models/x/model.safetensors';
const tensor = (name: string, dtype: 'f32' | 'f16' | 'bf16', shape: number[], values: number[]): HostTensor => ({
  name,
  dtype,
  shape,
  data: quantize(dtype, Float32Array.from(values)),
});

function withHeader(header: object, dataBytes = 0): Uint8Array {
  const json = Buffer.from(JSON.stringify(header));
  const out = new Uint8Array(8 + json.byteLength + dataBytes);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true);
  out.set(json, 8);
  return out;
}

function expectLoadError(bytes: Uint8Array, message: string): void {
  let caught: unknown;
  try {
    readSafetensors(bytes, FILE);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ModelLoadError);
  expect((caught as ModelLoadError).message).toBe(`${FILE}: ${message}`);
}

describe('safetensors', () => {
  it('round-trips F32, F16 and BF16 tensors with metadata, data 8-byte aligned', () => {
    const tensors = [
      tensor('a', 'f32', [2, 2], [1, 2, 3, 4]),
      tensor('b', 'f16', [3], [0.5, -1, 2]),
      tensor('c', 'bf16', [1], [3]),
    ];
    const bytes = encodeSafetensors(tensors, { format: 'pt' });
    const st = readSafetensors(bytes, FILE);
    expect(st.metadata).toEqual({ format: 'pt' });
    expect([...st.tensors.values()]).toEqual(tensors);
    expect(st.tensors.get('a')!.data.byteOffset % 8).toBe(0);
  });

  it('rejects a file too short for a header', () =>
    expectLoadError(new Uint8Array(5), 'truncated: 5 bytes, too short for a safetensors header'));

  it('rejects a header longer than the file', () => {
    const bytes = withHeader({});
    new DataView(bytes.buffer).setBigUint64(0, 1000n, true);
    expectLoadError(bytes, `truncated or corrupt: header claims 1000 bytes but the file has ${bytes.byteLength}`);
  });

  it('rejects a header that is not JSON', () => {
    const bytes = withHeader({});
    bytes[8] = 0x7b;
    bytes[9] = 0x7b;
    expectLoadError(bytes, 'corrupt safetensors header: not valid JSON');
  });

  it('rejects unsupported dtypes, bad shapes and offsets, and sizes that do not match', () => {
    expectLoadError(
      withHeader({ a: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, 8),
      'tensor a has dtype "I64" (Tessera reads F32, F16, BF16)',
    );
    expectLoadError(
      withHeader({ a: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } }, 4),
      'tensor a has a bad shape [-1]',
    );
    expectLoadError(
      withHeader({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 0] } }, 4),
      'tensor a has bad data_offsets [4,0]',
    );
    expectLoadError(
      withHeader({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 4] } }, 4),
      'tensor a: 4 bytes for f32 [2] (expected 8)',
    );
  });

  it('names a tensor cut off by a truncated file', () => {
    const bytes = encodeSafetensors([tensor('a', 'f32', [4], [1, 2, 3, 4]), tensor('b', 'f32', [4], [1, 2, 3, 4])]);
    expectLoadError(
      bytes.subarray(0, bytes.byteLength - 1),
      'truncated: tensor b needs data bytes 16..32 but the file holds 31 bytes of data',
    );
  });
});
