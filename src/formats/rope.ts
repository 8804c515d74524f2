// RoPE inverse frequencies for headDim/2 pairs (rotate-half / NeoX pairing: i with i + headDim/2,
// as Hugging Face does) and the attention factor, with every scaling type a ModelConfig can
// name. Pure functions in float64, rounded once to float32 at the end; they must never touch
// tensors or positions: kernels take these tables as arguments (RopeArgs in src/kernels).
import { assertNever } from '../core/index.js';
import type { ModelConfig } from './config.js';

export interface RopeTable {
  /** headDim/2 inverse frequencies, scaling applied. */
  readonly invFreq: Float32Array;
  /** Multiplier on cos and sin (YaRN's mscale); 1 for every other type. */
  readonly attentionFactor: number;
}

export type RopeConfig = Pick<ModelConfig, 'headDim' | 'ropeTheta' | 'ropeScaling' | 'ropeDims'>;

/** invFreq[i] = theta^(-2i/headDim), in float64. */
export function baseInvFreq(headDim: number, theta: number): Float64Array {
  const out = new Float64Array(headDim / 2);
  for (let i = 0; i < out.length; i++) out[i] = 1 / theta ** ((2 * i) / headDim);
  return out;
}

/** True when the table changes with the sequence length (dynamic NTK): recompute per length. */
export function ropeDependsOnLength(config: RopeConfig): boolean {
  return config.ropeScaling.type === 'dynamic';
}

/**
 * The RoPE table for a model. `seqLen` matters only for dynamic NTK scaling, which grows the
 * base once a sequence is longer than the original context (as transformers does).
 */
export function ropeTable(config: RopeConfig, seqLen = 0): RopeTable {
  const { headDim, ropeTheta, ropeDims } = config;
  if (ropeDims !== undefined && ropeDims !== headDim) {
    // Partial RoPE (validateConfig: unscaled): ropeDims/2 rotating pairs at base^(-2i/ropeDims), then
    // frequency 0 for the pairs that pass through (weights-prepared.ts orders q/k rows so: permute.ts).
    const invFreq = new Float64Array(headDim / 2);
    invFreq.set(baseInvFreq(ropeDims, ropeTheta));
    return table(invFreq, 1);
  }
  const scaling = config.ropeScaling;
  switch (scaling.type) {
    case 'none':
      return table(baseInvFreq(headDim, ropeTheta), 1);
    case 'linear':
      return table(
        baseInvFreq(headDim, ropeTheta).map((f) => f / scaling.factor),
        1,
      );
    case 'freq-factors':
      return table(
        baseInvFreq(headDim, ropeTheta).map((f, i) => f / scaling.factors[i]!),
        1,
      );
    case 'dynamic': {
      const original = scaling.originalMaxPositionEmbeddings;
      if (seqLen <= original) return table(baseInvFreq(headDim, ropeTheta), 1);
      const base =
        ropeTheta * ((scaling.factor * seqLen) / original - (scaling.factor - 1)) ** (headDim / (headDim - 2));
      return table(baseInvFreq(headDim, base), 1);
    }
    case 'llama3':
      return table(llama3InvFreq(baseInvFreq(headDim, ropeTheta), scaling), 1);
    case 'yarn':
      return yarnTable(headDim, ropeTheta, scaling);
    default:
      return assertNever(scaling, 'rope scaling');
  }
}

function table(invFreq: Float64Array, attentionFactor: number): RopeTable {
  return { invFreq: Float32Array.from(invFreq), attentionFactor };
}

type Llama3 = Extract<ModelConfig['ropeScaling'], { type: 'llama3' }>;

/** Llama 3.1: low frequencies divided by factor, high kept, a smooth blend between. */
function llama3InvFreq(invFreq: Float64Array, s: Llama3): Float64Array {
  const lowFreqWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
  const highFreqWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
  return invFreq.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < highFreqWavelen) return f;
    if (wavelen > lowFreqWavelen) return f / s.factor;
    const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
    return (1 - smooth) * (f / s.factor) + smooth * f;
  });
}

type Yarn = Extract<ModelConfig['ropeScaling'], { type: 'yarn' }>;

/** YaRN's magnitude correction: 0.1 * mscale * ln(scale) + 1 (1 when not scaling up). */
export function yarnMscale(scale: number, mscale = 1): number {
  return scale <= 1 ? 1 : 0.1 * mscale * Math.log(scale) + 1;
}

/** The dimension (of headDim) whose wavelength makes `rotations` turns in `context` tokens. */
function correctionDim(rotations: number, headDim: number, base: number, context: number): number {
  return (headDim * Math.log(context / (rotations * 2 * Math.PI))) / (2 * Math.log(base));
}

function yarnTable(headDim: number, theta: number, s: Yarn): RopeTable {
  let low = correctionDim(s.betaFast, headDim, theta, s.originalMaxPositionEmbeddings);
  let high = correctionDim(s.betaSlow, headDim, theta, s.originalMaxPositionEmbeddings);
  if (s.truncate) {
    low = Math.floor(low);
    high = Math.ceil(high);
  }
  low = Math.max(low, 0);
  high = Math.min(high, headDim - 1);
  if (low === high) high += 0.001;
  const extrapolation = baseInvFreq(headDim, theta);
  const invFreq = extrapolation.map((f, i) => {
    const ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
    const extrapolationWeight = 1 - ramp;
    return (f / s.factor) * (1 - extrapolationWeight) + f * extrapolationWeight;
  });
  const attentionFactor =
    s.attentionFactor ??
    (s.mscale !== null && s.mscaleAllDim !== null && s.mscale !== 0 && s.mscaleAllDim !== 0
      ? yarnMscale(s.factor, s.mscale) / yarnMscale(s.factor, s.mscaleAllDim)
      : yarnMscale(s.factor));
  return table(invFreq, attentionFactor);
}
