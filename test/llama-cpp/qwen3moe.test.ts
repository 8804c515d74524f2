// Qwen3-MoE (Qwen3's attention; every layer's MLP 16 routed experts, 4 per token, softmax then
// renormalised top-k, no shared expert) against llama.cpp's qwen3moe graph (build_moe_ffn):
// gen-model's qwen3moe-tiny, the checks of moe-agreement.ts: f32; f16, q8_0, q4_0 and q4_k_m (at a
// 256-wide residual, so every matrix is a K-quant; activations are quantized per block on both
// sides, with different rounding in places, and a routing near-tie may pick another expert for
// one token); the HF directory (Qwen3MoeForCausalLM, one tensor per expert) against the GGUF
// (3-D expert tensors). Negative controls: the same weights routed without the renormalisation,
// or with one expert fewer per token.
import { expect } from 'vitest';
import { describeAgreement } from './moe-agreement.js';

describeAgreement({
  preset: 'qwen3moe-tiny',
  seed: 5,
  hfClass: 'Qwen3MoeForCausalLM',
  quantized: ['f16', 'q8_0', 'q4_0', 'q4_k_m'],
  overrides: (dtype) => (dtype === 'q4_k_m' ? { hiddenSize: 256 } : undefined),
  checkConfig: (model) =>
    expect(model.config.moe).toEqual({
      numExperts: 16,
      numExpertsUsed: 4,
      expertIntermediateSize: 256,
      normTopkProb: true,
    }),
  controls: 'unnormalised routing, or one expert fewer per token,',
  negativeControls: (model) => {
    const moe = model.config.moe!;
    return [
      { ...model, config: { ...model.config, moe: { ...moe, normTopkProb: false } } },
      { ...model, config: { ...model.config, moe: { ...moe, numExpertsUsed: moe.numExpertsUsed - 1 } } },
    ];
  },
});
