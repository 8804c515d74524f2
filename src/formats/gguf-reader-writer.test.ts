import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { quantize } from '../kernels/index.js';
import { configFromGguf } from './gguf-config.js';
import { GGML_TYPE_OF_DTYPE, type GgufValue } from './gguf-format.js';
import { shortestF32 } from './gguf-meta.js';
import { ggufTensorBytes, readGguf } from './gguf-reader.js';
import { encodeGguf, gguf } from './gguf-writer.js';

const FILE = '/models/m.gguf';

const f32Tensor = (name: string, shape: number[], values: number[]) => ({
  name,
  shape,
  ggmlType: GGML_TYPE_OF_DTYPE.f32,
  data: quantize('f32', Float32Array.from(values)),
});

function expectLoadError(bytes: Uint8Array, message: string | RegExp): void {
  let caught: unknown;
  try {
    readGguf(bytes, FILE);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ModelLoadError);
  expect((caught as ModelLoadError).file).toBe(FILE);
  expect((caught as ModelLoadError).message).toMatch(message);
}

describe('GGUF reader and writer', () => {
  it('round-trips every metadata value type, nested arrays, tensor infos and data', () => {
    const metadata: [string, GgufValue][] = [
      ['u8', { type: 'u8', value: 200 }],
      ['i8', { type: 'i8', value: -5 }],
      ['u16', { type: 'u16', value: 60000 }],
      ['i16', { type: 'i16', value: -30000 }],
      ['u32', gguf.u32(4_000_000_000)],
      ['i32', gguf.i32(-7)],
      ['f32', gguf.f32(0.5)],
      ['bool', gguf.bool(true)],
      ['str', gguf.str('héllo 😀')],
      ['u64', { type: 'u64', value: 2n ** 63n }],
      ['i64', { type: 'i64', value: -(2n ** 62n) }],
      ['f64', { type: 'f64', value: Math.PI }],
      ['strs', gguf.strings(['a', '', 'ü'])],
      ['f32s', gguf.f32s([1.5, -2])],
      ['nested', { type: 'array', itemType: 'array', items: [gguf.i32s([1, 2]), gguf.strings(['x'])] }],
    ];
    const q8 = quantize(
      'q8_0',
      Float32Array.from({ length: 64 }, (_, i) => i - 32),
    );
    const bytes = encodeGguf(metadata, [
      f32Tensor('a', [3], [1, 2, 3]),
      { name: 'b', shape: [2, 32], ggmlType: GGML_TYPE_OF_DTYPE.q8_0, data: q8 },
    ]);
    const g = readGguf(bytes, FILE);
    expect(g.version).toBe(3);
    expect(g.alignment).toBe(32);
    expect([...g.metadata]).toEqual(metadata);
    expect(g.tensors.map((t) => [t.name, t.ne, t.shape, t.byteLength])).toEqual([
      ['a', [3], [3], 12],
      ['b', [32, 2], [2, 32], 68],
    ]);
    expect(g.dataOffset % 32).toBe(0);
    expect(g.tensors[1]!.fileOffset - g.dataOffset).toBe(32); // 12 bytes padded to the alignment
    expect([...new Float32Array(ggufTensorBytes(g, g.tensors[0]!).slice().buffer)]).toEqual([1, 2, 3]);
    expect(ggufTensorBytes(g, g.tensors[1]!)).toEqual(q8);
  });

  it('honours general.alignment', () => {
    const g = readGguf(
      encodeGguf([['general.alignment', gguf.u32(64)]], [f32Tensor('a', [3], [1, 2, 3]), f32Tensor('b', [1], [4])]),
      FILE,
    );
    expect(g.alignment).toBe(64);
    expect(g.dataOffset % 64).toBe(0);
    expect(g.tensors[1]!.fileOffset - g.dataOffset).toBe(64);
  });

  it('reads f32 metadata back as the short decimal it was written from', () => {
    expect(shortestF32(Math.fround(1e-5))).toBe(1e-5);
    expect(shortestF32(Math.fround(1e-6))).toBe(1e-6);
    expect(shortestF32(Math.fround(0.1))).toBe(0.1);
    expect(shortestF32(Math.fround(Math.PI))).toBe(3.1415927);
    expect(Math.fround(3.1415927)).toBe(Math.fround(Math.PI));
  });
});

describe('a corrupt GGUF is one ModelLoadError naming the file', () => {
  const good = encodeGguf([['general.architecture', gguf.str('llama')]], [f32Tensor('a', [4], [1, 2, 3, 4])]);
  const patched = (at: number, write: (v: DataView) => void): Uint8Array => {
    const copy = good.slice();
    write(new DataView(copy.buffer, at));
    return copy;
  };

  it('bad magic', () => expectLoadError(Buffer.from('GGML....................'), 'not a GGUF file: bad magic "GGML"'));
  it('an empty file', () => expectLoadError(new Uint8Array(0), 'bad magic ""'));
  it('an unsupported version', () => {
    expectLoadError(
      patched(4, (v) => v.setUint32(0, 1, true)),
      'unsupported GGUF version 1',
    );
    expectLoadError(
      patched(4, (v) => v.setUint32(0, 4, true)),
      'unsupported GGUF version 4',
    );
  });
  it('a tensor count that runs past the end', () => {
    expectLoadError(
      patched(8, (v) => v.setBigUint64(0, 2n ** 40n, true)),
      /corrupt header: tensor count at byte 8 is 1099511627776, which needs at least \d+ bytes, but only \d+ follow/,
    );
  });
  it('a metadata count that runs past the end', () => {
    expectLoadError(
      patched(16, (v) => v.setBigUint64(0, 1000n, true)),
      /corrupt header: metadata count at byte 16 is 1000/,
    );
  });
  it('a string length that runs past the end', () => {
    expectLoadError(
      patched(24, (v) => v.setBigUint64(0, 2n ** 62n, true)),
      /corrupt header: length of metadata key #0 at byte 24/,
    );
  });
  it('an unknown value type', () => {
    expectLoadError(
      patched(24 + 8 + 'general.architecture'.length, (v) => v.setUint32(0, 99, true)),
      'metadata general.architecture has unknown value type 99',
    );
  });
  it('a header cut short', () => {
    expectLoadError(good.subarray(0, 90), 'truncated: type of a at byte 90 runs past the end of the file (90 bytes)');
    expectLoadError(
      good.subarray(0, 60),
      'truncated: length of general.architecture at byte 56 runs past the end of the file (60 bytes)',
    );
    expectLoadError(
      good.subarray(0, 40),
      'corrupt header: tensor count at byte 8 is 1, which needs at least 32 bytes, but only 24 follow',
    );
  });
  it('tensor data cut short', () => {
    expectLoadError(good.subarray(0, 128 + 8), 'truncated: tensor a needs bytes 128..144 but the file has 136 bytes');
  });
});

describe('configFromGguf', () => {
  const llamaKeys = (extra: [string, GgufValue][] = []): [string, GgufValue][] => [
    ['general.architecture', gguf.str('llama')],
    ['llama.context_length', gguf.u32(2048)],
    ['llama.embedding_length', gguf.u32(64)],
    ['llama.block_count', gguf.u32(2)],
    ['llama.feed_forward_length', gguf.u32(128)],
    ['llama.attention.head_count', gguf.u32(4)],
    ['llama.attention.head_count_kv', gguf.u32(2)],
    ['llama.attention.layer_norm_rms_epsilon', gguf.f32(1e-5)],
    ['llama.rope.freq_base', gguf.f32(500000)],
    ['tokenizer.ggml.bos_token_id', gguf.u32(1)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(2)],
    ['tokenizer.ggml.eot_token_id', gguf.u32(7)],
    ...extra,
  ];
  const embed = f32Tensor('token_embd.weight', [10, 64], new Array(640).fill(0));

  it('reads llama.* keys with llama.cpp defaults; no output.weight means tied', () => {
    const c = configFromGguf(readGguf(encodeGguf(llamaKeys(), [embed]), FILE));
    expect(c).toEqual({
      arch: 'llama',
      vocabSize: 10,
      hiddenSize: 64,
      intermediateSize: 128,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 16,
      rmsNormEps: 1e-5,
      ropeTheta: 500000,
      ropeScaling: { type: 'none' },
      maxPositionEmbeddings: 2048,
      slidingWindow: null,
      tieWordEmbeddings: true,
      attentionBias: false,
      bosTokenId: 1,
      eosTokenIds: [2, 7],
      gemma3: null,
      moe: null,
    });
  });

  it('reads qwen2.* keys (q/k/v bias) and linear / yarn scaling keys', () => {
    const qwen = llamaKeys([['general.architecture', gguf.str('qwen2')]]).map(([k, v]): [string, GgufValue] => [
      k.replace(/^llama\./, 'qwen2.'),
      v,
    ]);
    const output = f32Tensor('output.weight', [10, 64], new Array(640).fill(0));
    const c = configFromGguf(
      readGguf(
        encodeGguf(
          [
            ...qwen.slice(1),
            ['qwen2.rope.scaling.type', gguf.str('linear')],
            ['qwen2.rope.scaling.factor', gguf.f32(4)],
          ],
          [embed, output],
        ),
        FILE,
      ),
    );
    expect([c.arch, c.attentionBias, c.tieWordEmbeddings, c.ropeScaling]).toEqual([
      'qwen2',
      true,
      false,
      { type: 'linear', factor: 4 },
    ]);
    const yarn = configFromGguf(
      readGguf(
        encodeGguf(
          llamaKeys([
            ['llama.rope.scaling.type', gguf.str('yarn')],
            ['llama.rope.scaling.factor', gguf.f32(4)],
            ['llama.rope.scaling.original_context_length', gguf.u32(512)],
          ]),
          [embed],
        ),
        FILE,
      ),
    );
    expect(yarn.ropeScaling).toMatchObject({
      type: 'yarn',
      factor: 4,
      originalMaxPositionEmbeddings: 512,
      attentionFactor: 0.1 * Math.log(4) + 1,
    });
  });

  it('turns a rope_freqs.weight tensor into per-frequency factors (Llama 3 in GGUF)', () => {
    const freqs = f32Tensor('rope_freqs.weight', [8], [1, 1, 2, 2, 4, 4, 8, 8]);
    expect(configFromGguf(readGguf(encodeGguf(llamaKeys(), [embed, freqs]), FILE)).ropeScaling).toEqual({
      type: 'freq-factors',
      factors: [1, 1, 2, 2, 4, 4, 8, 8],
    });
  });

  it('names the file and the value for an unknown architecture or a missing key', () => {
    const g = readGguf(encodeGguf(llamaKeys([['general.architecture', gguf.str('gemma2')]]).slice(1), [embed]), FILE);
    expect(() => configFromGguf(g)).toThrow(`${FILE}: unknown architecture: general.architecture "gemma2"`);
    const missing = readGguf(
      encodeGguf(
        llamaKeys().filter(([k]) => k !== 'llama.block_count'),
        [embed],
      ),
      FILE,
    );
    expect(() => configFromGguf(missing)).toThrow(`${FILE}: missing metadata key llama.block_count`);
    const wrongType = readGguf(encodeGguf(llamaKeys([['llama.block_count', gguf.str('2')]]), [embed]), FILE);
    expect(() => configFromGguf(wrongType)).toThrow('metadata llama.block_count must be an integer, got string "2"');
  });
});
