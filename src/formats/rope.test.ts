import { describe, expect, it } from 'vitest';
import type { RopeScaling } from './config.js';
import { ropeDependsOnLength, ropeTable } from './rope.js';

// Expected values are computed by hand (see the comments) from the formulas transformers uses.
function table(headDim: number, ropeScaling: RopeScaling, seqLen = 0) {
  return ropeTable({ headDim, ropeTheta: 10000, ropeScaling }, seqLen);
}

function expectClose(actual: Float32Array, expected: number[]): void {
  expect(actual.length).toBe(expected.length);
  // float32 results: within 1e-7 relative (an f32 ulp is 6e-8 relative).
  expected.forEach((e, i) => expect(Math.abs(actual[i]! - e)).toBeLessThanOrEqual(1e-7 * Math.abs(e)));
}

describe('ropeTable', () => {
  it('gives theta^(-2i/d) without scaling: d=4 -> [1, 0.01]; d=8 -> [1, 0.1, 0.01, 0.001]', () => {
    expectClose(table(4, { type: 'none' }).invFreq, [1, 0.01]);
    expectClose(table(8, { type: 'none' }).invFreq, [1, 0.1, 0.01, 0.001]);
    expect(table(8, { type: 'none' }).attentionFactor).toBe(1);
  });

  it('divides every frequency by the factor for linear scaling', () => {
    expectClose(table(4, { type: 'linear', factor: 2 }).invFreq, [0.5, 0.005]);
  });

  it('divides by per-frequency factors (GGUF rope_freqs)', () => {
    expectClose(table(4, { type: 'freq-factors', factors: [1, 4] }).invFreq, [1, 0.0025]);
  });

  it('grows the base for dynamic NTK only past the original context', () => {
    const dynamic: RopeScaling = { type: 'dynamic', factor: 2, originalMaxPositionEmbeddings: 100 };
    expectClose(table(4, dynamic, 50).invFreq, [1, 0.01]);
    // base = 10000 * (2 * 200 / 100 - 1)^(4 / 2) = 90000 -> [1, 1/300]
    expectClose(table(4, dynamic, 200).invFreq, [1, 1 / 300]);
    expect(ropeDependsOnLength({ headDim: 4, ropeTheta: 1e4, ropeScaling: dynamic })).toBe(true);
    expect(ropeDependsOnLength({ headDim: 4, ropeTheta: 1e4, ropeScaling: { type: 'none' } })).toBe(false);
  });

  it('keeps high, divides low and blends middle frequencies for llama3', () => {
    // original 1000, low 1, high 4, factor 8: low-frequency wavelength 1000, high 250.
    // wavelengths 2pi/f = 6.28, 62.8 (< 250: kept), 628.3 (blend), 6283 (> 1000: f / 8).
    // blend: s = (1000 * 0.01 / 2pi - 1) / 3 = 0.19718313; (1 - s) * 0.01 / 8 + s * 0.01 = 0.0029753524
    const scaling: RopeScaling = {
      type: 'llama3',
      factor: 8,
      lowFreqFactor: 1,
      highFreqFactor: 4,
      originalMaxPositionEmbeddings: 1000,
    };
    expectClose(table(8, scaling).invFreq, [1, 0.1, 0.0029753524, 0.000125]);
    expect(table(8, scaling).attentionFactor).toBe(1);
  });

  it('ramps between extrapolation and interpolation for yarn, with its attention factor', () => {
    // correction dims for beta 32 and 1 over 1000 tokens: 0.697 -> floor 0 and 2.202 -> ceil 3.
    // ramp [0, 1/3, 2/3, 1]; f * (1 - ramp) + f / 4 * ramp = [1, 0.075, 0.005, 0.00025]
    const yarn: RopeScaling = {
      type: 'yarn',
      factor: 4,
      originalMaxPositionEmbeddings: 1000,
      betaFast: 32,
      betaSlow: 1,
      attentionFactor: null,
      mscale: null,
      mscaleAllDim: null,
      truncate: true,
    };
    const t = table(8, yarn);
    expectClose(t.invFreq, [1, 0.075, 0.005, 0.00025]);
    expect(t.attentionFactor).toBeCloseTo(0.1 * Math.log(4) + 1, 12); // 1.138629
    expect(table(8, { ...yarn, attentionFactor: 0.5 }).attentionFactor).toBe(0.5);
    // mscale / mscale_all_dim (DeepSeek style): (0.1 * 2 * ln 4 + 1) / (0.1 * 1 * ln 4 + 1)
    expect(table(8, { ...yarn, mscale: 2, mscaleAllDim: 1 }).attentionFactor).toBeCloseTo(
      (0.2 * Math.log(4) + 1) / (0.1 * Math.log(4) + 1),
      12,
    );
  });
});
