// GLM-4 (dense glm4, GLM-4-0414's layout: q/k/v bias, partial RoPE on half of each head in adjacent
// pairs as llama.cpp's NORM rope, sandwich norms around attention and MLP, gate|up fused in its
// files) against llama.cpp's glm4 graph: gen-model's glm4-tiny (seed 7: its 32 greedy steps hold no
// near-tie, smallest margin 0.021), the checks of moe-agreement.ts (f32, q8_0, the HF directory
// Glm4ForCausalLM). Negative controls: the whole head rotated, the q/k/v biases zeroed.
import { expect } from 'vitest';
import { describeAgreement, zeroed } from './moe-agreement.js';

describeAgreement({
  preset: 'glm4-tiny',
  seed: 7,
  hfClass: 'Glm4ForCausalLM',
  quantized: ['q8_0'],
  checkConfig: (model) =>
    expect([model.config.arch, model.config.ropeDims, model.config.attentionBias]).toEqual(['glm4', 32, true]),
  controls: 'the whole head rotated, or the q/k/v biases zeroed,',
  negativeControls: (model) => [
    { ...model, config: { ...model.config, ropeDims: model.config.headDim } },
    zeroed(model, /_proj\.bias$/),
  ],
});
