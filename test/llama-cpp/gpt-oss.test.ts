// gpt-oss (q/k/v/o bias, a learned sink per head in every softmax, sliding-window attention on the
// even layers, YaRN factor 32; 16 experts, the top 4 by biased router logit weighted by a softmax
// over those 4, expert biases, the clamped SwiGLU) against llama.cpp's gpt-oss graph
// (llama_model_openai_moe: build_attn with attn_sinks, the iSWA KV cache, build_moe_ffn with
// SOFTMAX_WEIGHT and SWIGLU_OAI_MOE): gen-model's gpt-oss-tiny, the checks of moe-agreement.ts
// (f32, o200k tokenizing as llama.cpp does; in the full run MXFP4 experts, repacked exactly to q8_0
// at load, and q8_0). Negative
// controls: the sinks dropped, the window ignored (every layer full), the clamp removed, the
// weights a softmax over every expert (not over the chosen ones).
import { expect } from 'vitest';
import { PRESET_CONFIGS } from '../../src/gen/index.js';
import { describeAgreement } from './moe-agreement.js';

describeAgreement({
  preset: 'gpt-oss-tiny',
  seed: 5,
  hfClass: 'GptOssForCausalLM',
  quantized: ['mxfp4', 'q8_0'],
  hf: false,
  // o200k as Tessera reads it from the GGUF (pre 'gpt-4o'), harmony's markers among the texts.
  texts: [
    'The quick brown fox jumps over the lazy dog.',
    "Don't SHOUT: it's 12345 o'clock, we'VE said.  Two  spaces\n\nand lines\r\n",
    '日本語のテキストと emoji 🦊 and ünïcödé',
    '<|start|>user<|message|>Name a colour.<|end|><|start|>assistant<|channel|>final<|message|>Red<|return|>',
  ],
  checkConfig: (model) => {
    // What the GGUF's gpt-oss.* and rope.scaling.* keys give back is the preset's.
    const preset = PRESET_CONFIGS['gpt-oss-tiny'];
    expect(model.config.gptOss).toEqual(preset.gptOss);
    expect(model.config.moe).toEqual(preset.moe);
    expect(model.config.ropeScaling).toEqual(preset.ropeScaling);
    expect(model.config.gptOss?.slidingLayers).toEqual([true, false, true, false]);
  },
  controls: 'no sinks, no window, no clamp or weights from a softmax over every expert',
  negativeControls: (model) => {
    const g = model.config.gptOss!;
    const moe = model.config.moe!;
    const variant = (change: Partial<typeof g>) => ({
      ...model,
      config: { ...model.config, gptOss: { ...g, ...change } },
    });
    return [
      variant({ attentionSinks: false }),
      variant({ slidingLayers: g.slidingLayers.map(() => false) }),
      variant({ swigluLimit: null }),
      // A softmax over every expert, not renormalised over the chosen (renormalised, it would equal gpt-oss's).
      { ...model, config: { ...model.config, moe: { ...moe, gating: 'softmax' as const } } },
    ];
  },
});
