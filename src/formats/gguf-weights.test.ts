import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { quantize } from '../kernels/index.js';
import type { ModelConfig } from './config.js';
import { configFromGguf } from './gguf-config.js';
import { GGML_TYPE_OF_DTYPE, type GgufValue } from './gguf-format.js';
import { readGguf } from './gguf-reader.js';
import { loadGgufWeights } from './gguf-weights.js';
import { encodeGguf, gguf, type GgufTensorSpec } from './gguf-writer.js';
import { permuteRopeRows } from './permute.js';
import { generateTensor } from '../gen/index.js';
import { expectedTensors, hfToGgufName } from './tensor-names.js';

const FILE = '/m/mini.gguf';

function miniConfig(arch: 'llama' | 'qwen2'): ModelConfig {
  return {
    arch,
    vocabSize: 8,
    hiddenSize: 32,
    intermediateSize: 32,
    numLayers: 1,
    numHeads: 2,
    numKvHeads: 1,
    headDim: 16,
    rmsNormEps: 1e-6,
    ropeTheta: 10000,
    ropeScaling: { type: 'none' },
    maxPositionEmbeddings: 64,
    slidingWindow: null,
    tieWordEmbeddings: false,
    attentionBias: arch === 'qwen2',
    bosTokenId: null,
    eosTokenIds: [],
    gemma3: null,
    moe: null,
  };
}

/** A GGUF of random weights, Q/K permuted as llama.cpp's converter does for `permute`. */
function miniGguf(
  config: ModelConfig,
  permute: boolean,
  extra: (GgufTensorSpec & { data: Uint8Array })[] = [],
): Uint8Array {
  const a = config.arch;
  const metadata: [string, GgufValue][] = [
    ['general.architecture', gguf.str(a)],
    [`${a}.context_length`, gguf.u32(64)],
    [`${a}.embedding_length`, gguf.u32(32)],
    [`${a}.block_count`, gguf.u32(1)],
    [`${a}.feed_forward_length`, gguf.u32(32)],
    [`${a}.attention.head_count`, gguf.u32(2)],
    [`${a}.attention.head_count_kv`, gguf.u32(1)],
    [`${a}.attention.layer_norm_rms_epsilon`, gguf.f32(1e-6)],
  ];
  const tensors = [...expectedTensors(config)].map(([name, shape]) => {
    const values = generateTensor(config, name, shape, 1);
    const heads = /q_proj/.test(name) ? config.numHeads : /k_proj/.test(name) ? config.numKvHeads : 0;
    const f32 = { name, dtype: 'f32' as const, shape, data: quantize('f32', values) };
    const data = permute && heads > 0 ? permuteRopeRows(f32, heads, 'hf-to-gguf').data : f32.data;
    return { name: hfToGgufName(name), shape, ggmlType: GGML_TYPE_OF_DTYPE.f32, data };
  });
  return encodeGguf(metadata, [...tensors, ...extra]);
}

function load(bytes: Uint8Array) {
  const g = readGguf(bytes, FILE);
  const config = configFromGguf(g);
  return { config, tensors: loadGgufWeights(g, config) };
}

describe('GGUF weights', () => {
  it.each([
    ['llama', true],
    ['qwen2', false],
  ] as const)('%s: Q/K come back in HF order (permuted on disk: %s), biases included', (arch, permuted) => {
    const config = miniConfig(arch);
    const { tensors } = load(miniGguf(config, permuted));
    expect([...tensors.keys()]).toEqual([...expectedTensors(config).keys()]);
    for (const [name, t] of tensors)
      expect(new Float32Array(t.data.slice().buffer), name).toEqual(generateTensor(config, name, t.shape, 1));
    expect(tensors.has('model.layers.0.self_attn.q_proj.bias')).toBe(arch === 'qwen2');
  });

  it('names the file and tensor for a GGML type Tessera cannot load', () => {
    const config = miniConfig('llama');
    const bytes = miniGguf(config, true).slice();
    const g = readGguf(bytes, FILE);
    const q4k = encodeGguf(
      [...g.metadata],
      g.tensors.map((t) => ({
        name: t.name,
        shape: t.shape,
        ggmlType: t.name === 'token_embd.weight' ? 3 : t.ggmlType,
        data:
          t.name === 'token_embd.weight'
            ? new Uint8Array(160)
            : bytes.subarray(t.fileOffset, t.fileOffset + t.byteLength!),
      })),
    );
    expect(() => load(q4k)).toThrow(
      new ModelLoadError(
        FILE,
        'tensor token_embd.weight has type Q4_1; Tessera loads F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and MXFP4 (repacked)',
      ),
    );
  });

  it('rejects a tensor it would otherwise ignore, and a missing one', () => {
    const config = miniConfig('llama');
    const qNorm = { name: 'blk.0.attn_q_norm.weight', shape: [16], ggmlType: 0, data: new Uint8Array(64) };
    expect(() => load(miniGguf(config, true, [qNorm]))).toThrow(
      `${FILE}: unexpected tensor model.layers.0.self_attn.q_norm.weight: not part of a llama model with this config`,
    );
    const qwenAsLlama = miniGguf(miniConfig('qwen2'), false);
    const g = readGguf(qwenAsLlama, FILE);
    const withoutBias = encodeGguf(
      [...g.metadata],
      g.tensors
        .filter((t) => t.name !== 'blk.0.attn_k.bias')
        .map((t) => ({
          name: t.name,
          shape: t.shape,
          ggmlType: t.ggmlType,
          data: qwenAsLlama.subarray(t.fileOffset, t.fileOffset + t.byteLength!),
        })),
    );
    expect(() => load(withoutBias)).toThrow(
      `${FILE}: missing tensor model.layers.0.self_attn.k_proj.bias (shape [16] expected from the config)`,
    );
  });
});
