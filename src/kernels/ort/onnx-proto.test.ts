import ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { OnnxDataType, encodeModel } from './onnx-proto.js';

describe('encodeModel', () => {
  const model = encodeModel({
    irVersion: 8,
    opsets: [{ domain: '', version: 17 }],
    graphName: 'g',
    nodes: [
      {
        opType: 'Gemm',
        name: 'dense',
        inputs: ['x', 'W'],
        outputs: ['y'],
        attributes: [
          { kind: 'int', name: 'transB', value: 1 },
          { kind: 'float', name: 'alpha', value: 2 },
        ],
      },
    ],
    initializers: [
      {
        name: 'W',
        dataType: OnnxDataType.FLOAT,
        dims: [3, 2],
        raw: new Uint8Array(Float32Array.from([1, 0, 0, 1, 1, 1]).buffer),
      },
    ],
    inputs: [{ name: 'x', dataType: OnnxDataType.FLOAT, dims: ['m', 2] }],
    outputs: [{ name: 'y', dataType: OnnxDataType.FLOAT, dims: ['m', 3] }],
  });

  it('starts with ir_version as field 1 varint and names the producer', () => {
    expect([...model.subarray(0, 2)]).toEqual([0x08, 8]);
    expect(new TextDecoder().decode(model.subarray(2, 11))).toBe('\u0012\u0007tessera');
  });

  it('is accepted by onnxruntime, with a symbolic batch dim and working attributes', async () => {
    const session = await ort.InferenceSession.create(model);
    try {
      expect(session.inputMetadata[0]).toMatchObject({ name: 'x', shape: ['m', 2] });
      const { y } = await session.run({ x: new ort.Tensor('float32', Float32Array.from([1, 2, 3, 4]), [2, 2]) });
      expect([...(y!.data as Float32Array)]).toEqual([2, 4, 6, 6, 8, 14]); // alpha 2 · x · Wᵀ
      expect(y!.dims).toEqual([2, 3]);
    } finally {
      await session.release();
    }
  });

  it('refuses negative integer attributes instead of mis-encoding them', () => {
    expect(() =>
      encodeModel({
        irVersion: 8,
        opsets: [],
        graphName: 'g',
        nodes: [
          { opType: 'X', name: 'n', inputs: [], outputs: [], attributes: [{ kind: 'int', name: 'a', value: -1 }] },
        ],
        initializers: [],
        inputs: [],
        outputs: [],
      }),
    ).toThrow(/non-negative/);
  });
});
