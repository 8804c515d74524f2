// Gemma 3's paged, batched forward pass against a naive one written here from Hugging Face's
// description of Gemma3ForCausalLM: f64, no pages, the whole sequence recomputed per position.
// Covers what the llama.cpp comparison cannot (llama.cpp assumes query_pre_attn_scalar = head
// dim and gen-model writes no softcap): another attention scale, final logit softcapping, a
// window smaller than a page boundary's reach, and the ref and wasm op kernels alike.
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId } from '../../core/index.js';
import { createRefDense, createRefOps, createWasmOps, type HostTensor, type OpKernels } from '../../kernels/index.js';
import { PagePool, elementsPerPage } from '../../pages/index.js';
import type { ModelConfig } from '../../formats/index.js';
import { tensorToF32, ropeTable, EMBED, FINAL_NORM, LM_HEAD, layerName } from '../../formats/index.js';
import { PRESET_CONFIGS, randomModel } from '../../gen/index.js';
import { ModelRunner } from '../runner.js';
import { prepareWeights } from '../weights-prepared.js';

const CONFIG: ModelConfig = {
  ...PRESET_CONFIGS['gemma3-tiny'],
  vocabSize: 80,
  hiddenSize: 48,
  intermediateSize: 96,
  numLayers: 3,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
  gemma3: {
    slidingWindow: 3,
    localLayers: [true, false, true],
    ropeLocalTheta: 10000,
    queryPreAttnScalar: 12,
    finalLogitSoftcap: 30,
  },
};

/** Logits after the last token, the slow way (norm tensors hold the multiplier 1 + w, as canonical ones do). */
function naiveLogits(config: ModelConfig, tensors: ReadonlyMap<string, HostTensor>, tokens: readonly number[]) {
  const g = config.gemma3!;
  const W = (name: string) => Float64Array.from(tensorToF32(tensors.get(name)!));
  const { hiddenSize: d, numHeads: H, numKvHeads: Hkv, headDim: hd, intermediateSize: ff, rmsNormEps: eps } = config;
  const matvec = (w: Float64Array, x: Float64Array, rows: number) =>
    Float64Array.from({ length: rows }, (_, r) => x.reduce((s, xi, i) => s + w[r * x.length + i]! * xi, 0));
  const rmsNorm = (x: Float64Array, w: Float64Array) => {
    const scale = 1 / Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length + eps);
    return x.map((v, i) => v * scale * w[i]!);
  };
  const perHead = (x: Float64Array, heads: number, w: Float64Array) => {
    const out = new Float64Array(x.length);
    for (let h = 0; h < heads; h++) out.set(rmsNorm(x.slice(h * hd, (h + 1) * hd), w), h * hd);
    return out;
  };
  const add = (x: Float64Array, y: Float64Array) => x.map((v, i) => v + y[i]!);
  const rope = (x: Float64Array, heads: number, pos: number, theta: number) => {
    const { invFreq } = ropeTable({ headDim: hd, ropeTheta: theta, ropeScaling: { type: 'none' } });
    const out = x.slice();
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < hd / 2; i++) {
        const angle = Math.fround(pos * invFreq[i]!);
        const [a, b] = [x[h * hd + i]!, x[h * hd + i + hd / 2]!];
        out[h * hd + i] = a * Math.cos(angle) - b * Math.sin(angle);
        out[h * hd + i + hd / 2] = b * Math.cos(angle) + a * Math.sin(angle);
      }
    }
    return out;
  };
  const gelu = (x: number) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
  const embed = W(EMBED);
  let xs = tokens.map((t) => embed.slice(t * d, (t + 1) * d).map((v) => v * Math.sqrt(d)));
  for (let l = 0; l < config.numLayers; l++) {
    const n = (s: string) => layerName(l, s);
    const local = g.localLayers[l]!;
    const theta = local ? g.ropeLocalTheta : config.ropeTheta;
    const normed = xs.map((x) => rmsNorm(x, W(n('input_layernorm.weight'))));
    const proj = (name: string, x: Float64Array, rows: number) => matvec(W(n(`self_attn.${name}.weight`)), x, rows);
    const qs = normed.map((x, p) =>
      rope(perHead(proj('q_proj', x, H * hd), H, W(n('self_attn.q_norm.weight'))), H, p, theta),
    );
    const ks = normed.map((x, p) =>
      rope(perHead(proj('k_proj', x, Hkv * hd), Hkv, W(n('self_attn.k_norm.weight'))), Hkv, p, theta),
    );
    const vs = normed.map((x) => proj('v_proj', x, Hkv * hd));
    xs = xs.map((x, t) => {
      const first = local ? Math.max(0, t - g.slidingWindow + 1) : 0;
      const att = new Float64Array(H * hd);
      for (let h = 0; h < H; h++) {
        const kvh = Math.floor(h / (H / Hkv));
        const scores = ks.slice(first, t + 1).map((k) => {
          let dot = 0;
          for (let i = 0; i < hd; i++) dot += qs[t]![h * hd + i]! * k[kvh * hd + i]!;
          return dot / Math.sqrt(g.queryPreAttnScalar);
        });
        const max = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - max));
        const sum = e.reduce((a, b) => a + b, 0);
        e.forEach((ep, j) => {
          for (let i = 0; i < hd; i++) att[h * hd + i] += (ep / sum) * vs[first + j]![kvh * hd + i]!;
        });
      }
      const attOut = rmsNorm(matvec(W(n('self_attn.o_proj.weight')), att, d), W(n('post_attention_layernorm.weight')));
      const h1 = add(x, attOut);
      const m = rmsNorm(h1, W(n('pre_feedforward_layernorm.weight')));
      const gate = matvec(W(n('mlp.gate_proj.weight')), m, ff);
      const up = matvec(W(n('mlp.up_proj.weight')), m, ff);
      const mlp = matvec(
        W(n('mlp.down_proj.weight')),
        gate.map((v, i) => gelu(v) * up[i]!),
        d,
      );
      return add(h1, rmsNorm(mlp, W(n('post_feedforward_layernorm.weight'))));
    });
  }
  const last = rmsNorm(xs.at(-1)!, W(FINAL_NORM));
  const cap = g.finalLogitSoftcap;
  const logits = matvec(W(config.tieWordEmbeddings ? EMBED : LM_HEAD), last, config.vocabSize);
  return cap === null ? logits : logits.map((v) => cap * Math.tanh(v / cap));
}

/** Tessera's logits after each token: one prefill chunk, then single-token decode steps, pages of 2 slots. */
async function pagedLogits(config: ModelConfig, ops: OpKernels, tokens: readonly number[], prefill: number) {
  const { tensors } = randomModel(config, 9);
  const dense = createRefDense();
  const shape = { numPages: 8, pageSize: 2, numLayers: config.numLayers, numKvHeads: config.numKvHeads, headDim: 8 };
  const pool = new PagePool({
    kv: { ...shape, dtype: 'f32', data: ops.allocF32(shape.numPages * elementsPerPage(shape)) },
  });
  const weights = await prepareWeights(config, tensors, dense, ops);
  const runner = new ModelRunner({ config, weights, dense, ops, pool, maxStepTokens: 16, maxStepLogits: 2 });
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
  return { tensors, out };
}

const TOKENS = [3, 17, 42, 5, 77, 8, 8, 61, 30];

describe('forwardGemma3 against a naive Gemma 3', () => {
  it.each([
    ['ref', () => Promise.resolve(createRefOps())],
    ['wasm', () => createWasmOps()],
  ])(
    '%s ops: the same logits at every position (window 3, scalar 12, softcap 30; prefill of 5, then decode)',
    async (_, make) => {
      const { tensors, out } = await pagedLogits(CONFIG, await make(), TOKENS, 5);
      expect(out).toHaveLength(5);
      out.forEach((logits, i) => {
        const expected = naiveLogits(CONFIG, tensors, TOKENS.slice(0, 5 + i));
        expect(Math.max(...logits.map((v, j) => Math.abs(v - expected[j]!)))).toBeLessThan(1e-3);
      });
    },
  );

  it('the naive oracle can tell: without the window, or with head_dim^-1/2 as scale, the logits change', () => {
    const { tensors } = randomModel(CONFIG, 9);
    const base = naiveLogits(CONFIG, tensors, TOKENS);
    const g = CONFIG.gemma3!;
    for (const changed of [
      { ...g, localLayers: [false, false, false] },
      { ...g, queryPreAttnScalar: CONFIG.headDim },
    ]) {
      const other = naiveLogits({ ...CONFIG, gemma3: changed }, tensors, TOKENS);
      expect(Math.max(...base.map((v, j) => Math.abs(v - other[j]!)))).toBeGreaterThan(1e-2);
    }
  });
});
