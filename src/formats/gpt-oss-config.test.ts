// gpt-oss's pieces one by one: MXFP4 blocks as llama.cpp decodes them and their exact repack to
// q8_0 (bf16 where a scale is no f16), gpt-oss-20b's parameter count from its shape, its routing
// (top k by logit, softmax over those k) and its clamped SwiGLU.
import { describe, expect, it } from 'vitest';
import { Rng } from '../core/index.js';
import { dequantize } from '../kernels/index.js';
import { routeTopKSoftmax, swigluOai } from '../engine/index.js';
import { countParameters } from './config.js';
import { configFromHf } from './hf-config.js';
import { GPT_OSS_SWIGLU, slidingLayersFromPattern } from './gpt-oss-config.js';
import { dequantizeMxfp4, emptyRepackStats, MXFP4_BLOCK_BYTES, quantizeMxfp4, repackMxfp4 } from './mxfp4.js';
import { PRESET_CONFIGS } from '../gen/index.js';

/** `blocks` random MXFP4 blocks whose scale bytes come from `scale`. */
function randomBlocks(rng: Rng, blocks: number, scale: (b: number) => number): Uint8Array {
  const data = new Uint8Array(blocks * MXFP4_BLOCK_BYTES);
  for (let b = 0; b < blocks; b++) {
    data[b * MXFP4_BLOCK_BYTES] = scale(b);
    for (let j = 1; j < MXFP4_BLOCK_BYTES; j++) data[b * MXFP4_BLOCK_BYTES + j] = rng.nextU32() & 0xff;
  }
  return data;
}

describe('MXFP4', () => {
  it('decodes a block as llama.cpp: low nibbles are weights 0-15, high nibbles 16-31, times 2^(e - 128)', () => {
    const block = new Uint8Array(MXFP4_BLOCK_BYTES);
    block[0] = 127; // 2^-1
    block[1] = 0x97; // code 7 (12) low, code 9 (-1) high
    block[2] = 0x0f; // code 15 (-12) low, 0 high
    const w = dequantizeMxfp4(block, 32);
    expect([w[0], w[16], w[1], w[17], w[2]]).toEqual([6, -0.5, -6, 0, 0]);
  });

  it('repacks into q8_0 exactly (scales 2^-24 .. 2^15), and an all-zero block whatever its scale', () => {
    const rng = new Rng(3);
    const data = randomBlocks(rng, 64, (b) => 104 + (b % 40));
    data.fill(0, 40 * MXFP4_BLOCK_BYTES + 1, 41 * MXFP4_BLOCK_BYTES);
    data[40 * MXFP4_BLOCK_BYTES] = 7; // 2^-121: no f16, but every code is zero
    const stats = emptyRepackStats();
    const t = repackMxfp4('w', [64, 32], data, stats, 'f.gguf');
    expect(t.dtype).toBe('q8_0');
    const got = new Float32Array(64 * 32);
    dequantize('q8_0', t.data, 0, got.length, got);
    expect(got).toEqual(dequantizeMxfp4(data, 64 * 32));
    expect(stats).toEqual({ tensors: 1, mxfp4Bytes: 64 * 17, repackedBytes: 64 * 34, bf16Tensors: 0 });
  });

  it('falls back to bf16, still exact, when a scale has no f16 form; refuses a NaN scale', () => {
    const rng = new Rng(4);
    const data = randomBlocks(rng, 8, (b) => (b === 5 ? 60 : b === 6 ? 200 : 120));
    const stats = emptyRepackStats();
    const t = repackMxfp4('w', [8, 32], data, stats, 'f.gguf');
    expect(t.dtype).toBe('bf16');
    const got = new Float32Array(8 * 32);
    dequantize('bf16', t.data, 0, got.length, got);
    expect(got).toEqual(dequantizeMxfp4(data, 8 * 32));
    expect(stats.bf16Tensors).toBe(1);
    data[0] = 255;
    expect(() => repackMxfp4('w', [8, 32], data, stats, 'f.gguf')).toThrow(/f\.gguf: tensor w: an MXFP4 scale is NaN/);
  });

  it('quantizes as quantize_row_mxfp4_ref: scale floor(log2 amax) - 3, values already on the grid come back', () => {
    const values = Float32Array.from(
      { length: 32 },
      (_, i) => [0, 0.5, 1, 1.5, 2, 3, 4, 6][i % 8]! * (i < 16 ? 1 : -1),
    );
    const data = quantizeMxfp4(values);
    expect(data[0]).toBe(127); // amax 6: floor(log2 6) = 2, e = 2 - 2 + 127
    expect(dequantizeMxfp4(data, 32)).toEqual(values.map((v) => (v === 0 ? 0 : v)));
  });
});

describe('gpt-oss config', () => {
  it("gpt-oss-20b's shape (24 layers, 32 experts of 2880, vocab 201088) counts ~20.9B parameters", () => {
    const preset = PRESET_CONFIGS['gpt-oss-20b-2l'];
    const config = {
      ...preset,
      numLayers: 24,
      vocabSize: 201088,
      gptOss: { ...preset.gptOss!, slidingLayers: slidingLayersFromPattern(24, 2) },
    };
    const n = countParameters(config);
    expect(n).toBeGreaterThan(20.8e9);
    expect(n).toBeLessThan(21.0e9);
  });

  it("refuses gpt-oss's Hugging Face directory by name (its MXFP4 _blocks/_scales are not read): GGUF only", () => {
    const json = { architectures: ['GptOssForCausalLM'], model_type: 'gpt_oss', hidden_size: 2880 };
    expect(() => configFromHf(json, '/m/config.json')).toThrow(
      '/m/config.json: gpt-oss is read from GGUF only (its Hugging Face directory, MXFP4 _blocks/_scales, is not)',
    );
  });

  it('layers slide as llama.cpp set_swa_pattern(2): the even ones', () => {
    expect(slidingLayersFromPattern(5, 2)).toEqual([true, false, true, false, true]);
  });
});

describe('gpt-oss routing and activation', () => {
  it('chooses the top k by logit and weighs them by a softmax over those k alone', () => {
    const logits = Float32Array.from([0.5, 3, -1, 2, 2.5]);
    const ids = new Int32Array(2);
    const weights = new Float32Array(2);
    routeTopKSoftmax(logits, 1, 5, 2, new Float32Array(5), ids, weights);
    expect([...ids]).toEqual([1, 4]);
    const e = Math.exp(-0.5);
    expect(weights[0]).toBeCloseTo(1 / (1 + e), 6);
    expect(weights[1]).toBeCloseTo(e / (1 + e), 6);
  });

  it('clamps the gate above at 7 and up to [-7, 7], then gate · σ(1.702 gate) · (up + 1)', () => {
    const g = { slidingWindow: 1, slidingLayers: [], attentionSinks: true, swigluLimit: 7, swigluAlpha: 1.702 };
    const out = new Float32Array(3);
    swigluOai(Float32Array.from([10, -2, 1]), Float32Array.from([20, -9, 0.5]), out, 3, g);
    const silu = (x: number) => x / (1 + Math.exp(-GPT_OSS_SWIGLU.alpha * x));
    expect(out[0]).toBeCloseTo(silu(7) * 8, 4);
    expect(out[1]).toBeCloseTo(silu(-2) * -6, 5);
    expect(out[2]).toBeCloseTo(silu(1) * 1.5, 5);
    swigluOai(Float32Array.from([10]), Float32Array.from([20]), out, 1, { ...g, swigluLimit: null });
    expect(out[0]).toBeCloseTo(silu(10) * 21, 3);
  });
});
