import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../core/index.js';
import { quantize, type HostTensor } from '../kernels/index.js';
import { validateConfig } from './config.js';
import { splitFused } from './fused.js';
import { PRESET_CONFIGS } from '../gen/index.js';

const config = validateConfig({ ...PRESET_CONFIGS['phi3-tiny'], numLayers: 1 }, 'test');
const fused = (name: string, rows: number): HostTensor => {
  const values = Float32Array.from({ length: rows * 128 }, (_, i) => i % 97);
  return { name, dtype: 'q8_0', shape: [rows, 128], data: quantize('q8_0', values) };
};

describe("Phi-3's fused projections", () => {
  it('split into q/k/v and gate/up as zero-copy row views of the fused bytes, dtype kept', () => {
    const qkv = fused('model.layers.0.self_attn.qkv_proj.weight', 384);
    const gateUp = fused('model.layers.0.mlp.gate_up_proj.weight', 768);
    const out = splitFused(
      new Map([
        [qkv.name, qkv],
        [gateUp.name, gateUp],
      ]),
      config,
      'f',
    );
    expect([...out.keys()].sort()).toEqual([
      'model.layers.0.mlp.gate_proj.weight',
      'model.layers.0.mlp.up_proj.weight',
      'model.layers.0.self_attn.k_proj.weight',
      'model.layers.0.self_attn.q_proj.weight',
      'model.layers.0.self_attn.v_proj.weight',
    ]);
    const k = out.get('model.layers.0.self_attn.k_proj.weight')!;
    expect(k).toMatchObject({ dtype: 'q8_0', shape: [128, 128] });
    expect(k.data.buffer).toBe(qkv.data.buffer);
    expect(k.data.byteOffset - qkv.data.byteOffset).toBe(128 * 4 * 34); // 128 q rows of 4 blocks
  });

  it('refuses a fused tensor whose rows do not match the config', () => {
    const qkv = fused('model.layers.0.self_attn.qkv_proj.weight', 320);
    expect(() => splitFused(new Map([[qkv.name, qkv]]), config, 'f')).toThrow(ModelLoadError);
  });
});
