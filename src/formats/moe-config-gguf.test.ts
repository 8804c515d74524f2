import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { quantize } from '../kernels/index.js';
import { configFromGguf } from './gguf-config.js';
import { GGML_TYPE_OF_DTYPE } from './gguf-format.js';
import { readGguf } from './gguf-reader.js';
import { loadGgufWeights } from './gguf-weights.js';
import { encodeGguf, gguf, type GgufTensorSpec } from './gguf-writer.js';
import { expertName } from './tensor-names.js';

// A one-layer qwen3moe GGUF built here: d 32, 2 heads of 16 (1 KV), 4 experts of 32, 2 per token.
const D = 32;
const FF = 32;
const metadata = (experts: number) => [
  ['general.architecture', gguf.str('qwen3moe')] as const,
  ['qwen3moe.context_length', gguf.u32(256)] as const,
  ['qwen3moe.embedding_length', gguf.u32(D)] as const,
  ['qwen3moe.block_count', gguf.u32(1)] as const,
  ['qwen3moe.feed_forward_length', gguf.u32(96)] as const,
  ['qwen3moe.attention.head_count', gguf.u32(2)] as const,
  ['qwen3moe.attention.head_count_kv', gguf.u32(1)] as const,
  ['qwen3moe.attention.key_length', gguf.u32(16)] as const,
  ['qwen3moe.attention.layer_norm_rms_epsilon', gguf.f32(1e-6)] as const,
  ['qwen3moe.rope.freq_base', gguf.f32(1e6)] as const,
  ['qwen3moe.expert_count', gguf.u32(experts)] as const,
  ['qwen3moe.expert_used_count', gguf.u32(2)] as const,
  ['qwen3moe.expert_feed_forward_length', gguf.u32(FF)] as const,
];

function file(experts: number, fileExperts = experts): Uint8Array {
  const shapes: [string, number[]][] = [
    ['token_embd.weight', [64, D]],
    ['output_norm.weight', [D]],
    ['output.weight', [64, D]],
    ['blk.0.attn_norm.weight', [D]],
    ['blk.0.attn_q.weight', [32, D]],
    ['blk.0.attn_k.weight', [16, D]],
    ['blk.0.attn_v.weight', [16, D]],
    ['blk.0.attn_q_norm.weight', [16]],
    ['blk.0.attn_k_norm.weight', [16]],
    ['blk.0.attn_output.weight', [D, 32]],
    ['blk.0.ffn_norm.weight', [D]],
    ['blk.0.ffn_gate_inp.weight', [experts, D]],
    ['blk.0.ffn_gate_exps.weight', [fileExperts, FF, D]],
    ['blk.0.ffn_up_exps.weight', [fileExperts, FF, D]],
    ['blk.0.ffn_down_exps.weight', [fileExperts, D, FF]],
  ];
  const tensors = shapes.map(([name, shape], i) => {
    const dtype = shape.length === 1 || name.includes('gate_inp') ? 'f32' : 'q8_0';
    const n = shape.reduce((a, b) => a * b, 1);
    const data = quantize(
      dtype,
      Float32Array.from({ length: n }, (_, j) => Math.sin(i * 131 + j)),
    );
    return { name, shape, ggmlType: GGML_TYPE_OF_DTYPE[dtype], data } satisfies GgufTensorSpec & { data: Uint8Array };
  });
  return encodeGguf(metadata(experts), tensors);
}

describe('a qwen3moe GGUF', () => {
  it("reads the routing config from qwen3moe.* keys (renormalised: llama.cpp's qwen3moe always is)", () => {
    const config = configFromGguf(readGguf(file(4), 'm.gguf'));
    expect(config.arch).toBe('qwen3moe');
    expect(config.moe).toEqual({ numExperts: 4, numExpertsUsed: 2, expertIntermediateSize: FF, normTopkProb: true });
  });

  it('splits each 3-D expert tensor into one zero-copy view per expert, in file order', () => {
    const bytes = file(4);
    const g = readGguf(bytes, 'm.gguf');
    const tensors = loadGgufWeights(g, configFromGguf(g));
    const stacked = g.tensors.find((t) => t.name === 'blk.0.ffn_down_exps.weight')!;
    const each = (D * FF * 34) / 32; // q8_0: 34 bytes per 32 weights
    for (let e = 0; e < 4; e++) {
      const t = tensors.get(expertName(0, e, 'down_proj'))!;
      expect(t.shape).toEqual([D, FF]);
      expect(t.dtype).toBe('q8_0');
      expect(t.data.buffer).toBe(bytes.buffer);
      expect(t.data.byteOffset).toBe(bytes.byteOffset + stacked.fileOffset + e * each);
      expect(t.data.byteLength).toBe(each);
    }
    expect(tensors.get('model.layers.0.mlp.gate.weight')?.dtype).toBe('f32');
  });

  it('refuses expert tensors that hold another number of experts than expert_count', () => {
    const g = readGguf(file(4, 3), 'm.gguf');
    expect(() => loadGgufWeights(g, configFromGguf(g))).toThrow(ModelLoadError);
    expect(() => loadGgufWeights(g, configFromGguf(g))).toThrow(/missing tensor model\.layers\.0\.mlp\.experts\.3\./);
  });
});
