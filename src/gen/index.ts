// Test and benchmark models: gen-model's presets, random weights and the vocabularies it ships.
// See README.md. Names used outside the module only.
export { GEN_DTYPES, useMoreBits, type GenDType } from './gen-mix.js';
export { genModel, type GenFormat, type GenOverrides, type GenProgress } from './gen-model.js';
export { GEN_CHAT_TEMPLATE } from './gen-vocab.js';
export { ggufVocabFromTokenizerJson, readLlama2Vocab } from './llama2-vocab.js';
export { GEN_PRESETS, generateTensor, PRESET_CONFIGS, type GenPreset } from './presets.js';
export { randomModel } from './random-model.js';
