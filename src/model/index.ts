// Layer 2: the model's I/O. Files on disk -> a normalized config, checked weights, a tokenizer
// and a chat template (loadModel); random-weight models for tests and benchmarks (genModel);
// RoPE tables. The forward pass, runner and sampler build on this API.
export { modelFingerprint } from './fingerprint.js';
export {
  loadModel,
  loadModelInfo,
  type LoadedModel,
  type LoadOptions,
  type ModelInfo,
  type ModelSource,
} from './load.js';
export {
  MODEL_ARCHS,
  countParameters,
  validateConfig,
  type ModelArch,
  type ModelConfig,
  type RopeScaling,
} from './config.js';
export { configFromHf } from './hf-config.js';
export { configFromGguf } from './gguf-config.js';
export { baseInvFreq, ropeDependsOnLength, ropeTable, yarnMscale, type RopeConfig, type RopeTable } from './rope.js';
export {
  createTokenizer,
  type DecodeOptions,
  type DetokenizerOptions,
  type EncodeOptions,
  type IncrementalDetokenizer,
  type Tokenizer,
} from './tokenizer.js';
export {
  DEFAULT_CHAT_TEMPLATE,
  createChatTemplate,
  type ChatMessage,
  type ChatTemplate,
  type RenderOptions,
} from './chat-template.js';
export { templateKnowsTools, type ToolCallText, type ToolSpec } from './tool-prompt.js';
export { EMBED, FINAL_NORM, LM_HEAD, expectedTensors, layerName } from './tensor-names.js';
export { elementCount, tensorToF32 } from './host-tensor.js';
export {
  GEN_CHAT_TEMPLATE,
  checkGenOptions,
  genConfig,
  genModel,
  type GenFormat,
  type GenOverrides,
  type GenModelOptions,
  type GenModelResult,
  type GenProgress,
} from './gen-model.js';
export { GEN_DTYPES, K_MIXES, tensorDtype, useMoreBits, type GenDType, type KMix } from './gen-mix.js';
export { GEN_PRESETS, LOGIT_STD, PRESET_CONFIGS, generateTensor, type GenPreset } from './presets.js';
export {
  BUILTIN_MODELS,
  builtinTinyDir,
  isBuiltinSpec,
  resolveBuiltinModel,
  type BuiltinModel,
  type BuiltinOptions,
} from './builtin.js';
export { packageRoot } from './package-root.js';
export { readGguf, type GgufFile, type GgufTensorInfo } from './gguf-reader.js';
export { vocabularyMismatch } from './draft-vocab.js';
export { readSafetensors } from './safetensors.js';
export { forward, type ForwardBatch, type ForwardModel, type ForwardSeq } from './forward.js';
export { forwardFor, forwardGemma3 } from './forward-gemma3.js';
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
export { loraFileDigest, type LoraControl } from './lora-control.js';
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
export {
  generate,
  type GenerateInput,
  type GenerateOptions,
  type GenerateOutput,
  type GenerateTiming,
} from './generate.js';
export {
  LONG_JOB_CHARS,
  startTokenizerPool,
  TokenizerPool,
  type TokenizerPoolOptions,
  type TokenizerPoolStats,
} from './tokenizer-pool.js';
export { promptRecipeOf, TOKENIZER_CRASH_MARKER, type PromptRecipe, type TokenizeJob } from './tokenizer-messages.js';
