// Layer 2: the model's I/O. Files on disk -> a normalized config, checked weights, a tokenizer
// and a chat template (loadModel); random-weight models for tests and benchmarks (genModel); the
// engine that runs them. Only the names used outside src/model.
export { loadModel, loadModelInfo, type LoadedModel, type ModelInfo } from './load.js';
export { type ModelConfig } from './config.js';
export { configFromHf } from './hf-config.js';
export { configFromGguf } from './gguf-config.js';
export { createTokenizer, type Tokenizer } from './tokenizer.js';
export { createChatTemplate, type ChatMessage, type ChatTemplate } from './chat-template.js';
export { type ToolSpec } from './tool-prompt.js';
export { genModel, type GenFormat, type GenOverrides, type GenProgress } from './gen-model.js';
export { GEN_DTYPES, useMoreBits, type GenDType } from './gen-mix.js';
export { GEN_PRESETS, PRESET_CONFIGS, type GenPreset } from './presets.js';
export { isBuiltinSpec, resolveBuiltinModel } from './builtin.js';
export { packageRoot } from './package-root.js';
export { readGguf, type GgufFile, type GgufTensorInfo } from './gguf-reader.js';
export { vocabularyMismatch } from './draft-vocab.js';
export { readSafetensors } from './safetensors.js';
export { forward, type ForwardBatch, type ForwardModel, type ForwardSeq } from './forward.js';
export { forwardFor } from './forward-arch.js';
export { forwardGemma3 } from './forward-gemma3.js';
export { prepareWeights, stackRows, type LayerWeights, type PreparedWeights } from './weights-prepared.js';
export {
  LocalForward,
  ModelRunner,
  type ExecRunnerOptions,
  type ForwardExec,
  type ItemResult,
  type ModelRunnerOptions,
  type RunnerStats,
} from './runner.js';
export { createThreadedEngine, type EngineThreadOptions, type ThreadedEngine } from './engine-thread.js';
export { LoraBank, LORA_TARGETS, type LoraAdapter, type LoraTarget } from './lora.js';
export type { LoraControl } from './lora-control.js';
export { genLoraGguf, parseLoraGguf, type GenLoraOptions } from './lora-gguf.js';
export { MIN_LOGPROB, Sampler, argmax, type SamplingChoice } from './sampler.js';
export {
  createEngine,
  DEFAULT_MAX_STEP_LOGITS,
  DEFAULT_MAX_STEP_TOKENS,
  DEFAULT_PAGE_SIZE,
  type Engine,
  type EngineKernels,
  type EngineOptions,
  type ModelWeights,
} from './engine.js';
export { randomModel } from './random-model.js';
export { generate } from './generate.js';
export { startTokenizerPool, TokenizerPool } from './tokenizer-pool.js';
export { promptRecipeOf, TOKENIZER_CRASH_MARKER, type TokenizeJob } from './tokenizer-messages.js';
