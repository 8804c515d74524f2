// Test support: the model shape the engine's unit tests run on the reference kernels. Owns that
// one config; must never be a preset (gen-model does not write it) nor be read by a server.
import type { ModelConfig } from '../../formats/index.js';
import { PRESET_CONFIGS } from '../presets.js';

/** 2 layers, GQA 4/2, a 96-token vocabulary: tiny enough for the reference kernels. */
export const REF_CONFIG: ModelConfig = {
  ...PRESET_CONFIGS.tiny,
  vocabSize: 96,
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
};
