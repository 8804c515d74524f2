// GLM-4.5 (glm4moe: q/k/v bias, q/k norms, partial NeoX RoPE on half of each head; layer 0 a dense
// SwiGLU, then 16 routed experts, 4 per token by sigmoid score + correction bias, normalised and
// scaled by 2.5, beside one shared expert) against llama.cpp's glm4moe graph (build_moe_ffn with
// gating func sigmoid and exp_probs_b): gen-model's glm4moe-tiny, the checks of moe-agreement.ts
// (f32, q8_0, the HF directory Glm4MoeForCausalLM). Negative controls: no correction bias in the
// choice, no routed scaling factor, softmax routing, the whole head rotated (no partial RoPE).
import { expect } from 'vitest';
import { PRESET_CONFIGS } from '../../src/gen/index.js';
import { describeAgreement, zeroed } from './moe-agreement.js';

describeAgreement({
  preset: 'glm4moe-tiny',
  seed: 5,
  hfClass: 'Glm4MoeForCausalLM',
  quantized: ['q8_0'],
  checkConfig: (model) => {
    // The routing read back from the GGUF's glm4moe.* keys is the preset's, sigmoid and scale included.
    expect(model.config.moe).toEqual(PRESET_CONFIGS['glm4moe-tiny'].moe);
    expect(model.config.moe?.gating).toBe('sigmoid');
    expect([model.config.ropeDims, model.config.qkNorm, model.config.attentionBias]).toEqual([32, true, true]);
  },
  controls: 'no correction bias, no scaling, softmax routing or the whole head rotated',
  negativeControls: (model) => {
    const moe = model.config.moe!;
    return [
      zeroed(model, /e_score_correction_bias$/),
      { ...model, config: { ...model.config, moe: { ...moe, routedScalingFactor: 1 } } },
      { ...model, config: { ...model.config, moe: { ...moe, gating: 'softmax' as const } } },
      { ...model, config: { ...model.config, ropeDims: model.config.headDim } },
    ];
  },
});
