// The paged, batched forward pass against a naive one written here from the textbook: f64, no
// pages, no fusion, the whole sequence recomputed for every position. Covers what llama.cpp
// comparisons cannot (gen-model writes only llama without biases): Qwen2's q/k/v biases, tied
// embeddings, a non-default RoPE theta and linear RoPE scaling.
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId } from '../../core/index.js';
import { createRefDense, createRefOps, type HostTensor } from '../../kernels/index.js';
import { PagePool } from '../../pages/index.js';
import type { ModelConfig } from '../../formats/index.js';
import { tensorToF32, ropeTable, EMBED, FINAL_NORM, LM_HEAD, layerName } from '../../formats/index.js';
import { PRESET_CONFIGS, randomModel } from '../../gen/index.js';
import { ModelRunner } from '../runner.js';
import { prepareWeights } from '../weights-prepared.js';

const BASE: ModelConfig = {
  ...PRESET_CONFIGS.tiny,
  vocabSize: 80,
  hiddenSize: 48,
  intermediateSize: 96,
  numLayers: 2,
  numHeads: 6,
  numKvHeads: 2,
  headDim: 8,
};

/** Logits [vocab] after the last token of `tokens`, the slow and obvious way. */
function naiveLogits(
  config: ModelConfig,
  tensors: ReadonlyMap<string, HostTensor>,
  tokens: readonly number[],
): Float64Array {
  const W = (name: string) => Float64Array.from(tensorToF32(tensors.get(name)!));
  const { hiddenSize: d, numHeads: H, numKvHeads: Hkv, headDim: hd, intermediateSize: ff, rmsNormEps: eps } = config;
  const matvec = (w: Float64Array, x: Float64Array, rows: number) =>
    Float64Array.from({ length: rows }, (_, r) => x.reduce((s, xi, i) => s + w[r * x.length + i]! * xi, 0));
  const rmsNorm = (x: Float64Array, w: Float64Array) => {
    const scale = 1 / Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length + eps);
    return x.map((v, i) => v * scale * w[i]!);
  };
  const add = (x: Float64Array, y: Float64Array) => x.map((v, i) => v + y[i]!);
  const { invFreq, attentionFactor } = ropeTable(config);
  const rope = (x: Float64Array, heads: number, pos: number) => {
    const out = x.slice();
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < hd / 2; i++) {
        const angle = Math.fround(pos * invFreq[i]!);
        const [c, s] = [Math.cos(angle) * attentionFactor, Math.sin(angle) * attentionFactor];
        const [a, b] = [x[h * hd + i]!, x[h * hd + i + hd / 2]!];
        out[h * hd + i] = a * c - b * s;
        out[h * hd + i + hd / 2] = b * c + a * s;
      }
    }
    return out;
  };
  const embed = W(EMBED);
  let xs = tokens.map((t) => embed.slice(t * d, (t + 1) * d));
  for (let l = 0; l < config.numLayers; l++) {
    const n = (s: string) => layerName(l, s);
    const proj = (name: string, x: Float64Array, rows: number) => {
      const y = matvec(W(n(`self_attn.${name}.weight`)), x, rows);
      return config.attentionBias ? add(y, W(n(`self_attn.${name}.bias`))) : y;
    };
    const normed = xs.map((x) => rmsNorm(x, W(n('input_layernorm.weight'))));
    const qs = normed.map((x, pos) => rope(proj('q_proj', x, H * hd), H, pos));
    const ks = normed.map((x, pos) => rope(proj('k_proj', x, Hkv * hd), Hkv, pos));
    const vs = normed.map((x) => proj('v_proj', x, Hkv * hd));
    xs = xs.map((x, t) => {
      const att = new Float64Array(H * hd);
      for (let h = 0; h < H; h++) {
        const g = Math.floor(h / (H / Hkv));
        const scores = ks.slice(0, t + 1).map((k) => {
          let dot = 0;
          for (let i = 0; i < hd; i++) dot += qs[t]![h * hd + i]! * k[g * hd + i]!;
          return dot / Math.sqrt(hd);
        });
        const max = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - max));
        const sum = e.reduce((a, b) => a + b, 0);
        for (let p = 0; p <= t; p++)
          for (let i = 0; i < hd; i++) att[h * hd + i] += (e[p]! / sum) * vs[p]![g * hd + i]!;
      }
      const h1 = add(x, matvec(W(n('self_attn.o_proj.weight')), att, d));
      const m = rmsNorm(h1, W(n('post_attention_layernorm.weight')));
      const gate = matvec(W(n('mlp.gate_proj.weight')), m, ff);
      const up = matvec(W(n('mlp.up_proj.weight')), m, ff);
      const hidden = gate.map((g, i) => (g / (1 + Math.exp(-g))) * up[i]!);
      return add(h1, matvec(W(n('mlp.down_proj.weight')), hidden, d));
    });
  }
  const last = rmsNorm(xs.at(-1)!, W(FINAL_NORM));
  return matvec(W(config.tieWordEmbeddings ? EMBED : LM_HEAD), last, config.vocabSize);
}

/** Tessera's logits after each token, fed one prefill chunk then single-token decode steps. */
async function pagedLogits(
  config: ModelConfig,
  tensors: ReadonlyMap<string, HostTensor>,
  tokens: readonly number[],
  prefill: number,
): Promise<Float32Array[]> {
  const dense = createRefDense();
  const ops = createRefOps();
  const pool = PagePool.create({
    numPages: 8,
    pageSize: 3,
    numLayers: config.numLayers,
    numKvHeads: config.numKvHeads,
    headDim: config.headDim,
  });
  const runner = new ModelRunner({
    config,
    weights: await prepareWeights(config, tensors, dense, ops),
    dense,
    ops,
    pool,
    maxStepTokens: 16,
    maxStepLogits: 2,
  });
  const owner = { rid: asRequestId('r'), tenant: asTenantId('t') };
  const allocated = pool.ledger.allocate(8, owner);
  if (allocated.kind !== 'allocated') throw new Error('pool');
  const out: Float32Array[] = [];
  for (let at = 0; at < tokens.length;) {
    const n = at === 0 ? prefill : 1;
    const [result] = await runner.step([
      { ...owner, tags: allocated.tags, tokens: tokens.slice(at, at + n), startPos: at, wantLogits: true },
    ]);
    if (result?.kind !== 'logits') throw new Error(`no logits: ${result?.kind}`);
    out.push(result.logits.slice());
    at += n;
  }
  return out;
}

const CASES: [string, Partial<ModelConfig>][] = [
  ['llama, GQA 6/2, untied', {}],
  [
    'qwen2: q/k/v biases, tied embeddings, theta 1e6',
    { arch: 'qwen2', attentionBias: true, tieWordEmbeddings: true, ropeTheta: 1e6 },
  ],
  [
    'mistral, multi-head (6/6), linear RoPE scaling x2',
    { arch: 'mistral', numKvHeads: 6, ropeScaling: { type: 'linear', factor: 2 } },
  ],
];

describe('forward() against a naive transformer', () => {
  it.each(CASES)('%s: the same logits at every position (prefill of 4, then decode)', async (_, overrides) => {
    const config = { ...BASE, ...overrides };
    const { tensors } = randomModel(config, 9);
    const tokens = [3, 17, 42, 5, 77, 8, 8, 61];
    const ours = await pagedLogits(config, tensors, tokens, 4);
    expect(ours).toHaveLength(5);
    ours.forEach((logits, i) => {
      const expected = naiveLogits(config, tensors, tokens.slice(0, 4 + i));
      const maxDiff = Math.max(...logits.map((v, j) => Math.abs(v - expected[j]!)));
      expect(maxDiff).toBeLessThan(1e-3);
    });
  });

  it('the naive oracle can tell: dropping the biases changes the logits (a forward that ignored them would fail)', async () => {
    const config = { ...BASE, ...CASES[1]![1] };
    const { tensors } = randomModel(config, 9);
    const withBias = naiveLogits(config, tensors, [3, 17, 42]);
    const noBias = naiveLogits({ ...config, attentionBias: false }, tensors, [3, 17, 42]);
    expect(Math.max(...withBias.map((v, j) => Math.abs(v - noBias[j]!)))).toBeGreaterThan(1e-2);
  });
});
