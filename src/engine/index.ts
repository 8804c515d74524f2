// Running a loaded model: kernel choice, weights prepared once, the forward passes, the runner
// with its page checks, the sampler, the engine thread and the step loop. See README.md.
// Names used outside the module only.
export { DraftModel, type DraftModelStats } from './draft-model.js';
export { rankTokens, restrictHead, type RestrictedHead } from './draft-head.js';
export {
  EngineLoop,
  type EngineLoopOptions,
  type EngineLoopStats,
  type MaxStepMs,
  type StepRunner,
} from './engine-loop.js';
export { createThreadedEngine, type ThreadedEngine, type WeightsFile } from './engine-thread.js';
export { createEngine, DEFAULT_MAX_STEP_TOKENS, DEFAULT_PAGE_SIZE, type Engine, type ModelWeights } from './engine.js';
export { routeSigmoidTopK, routeTopKSoftmax, swigluOai } from './forward/moe.js';
export { generate } from './generate.js';
export { loraFileDigest, type LoraControl } from './lora-control.js';
export { genLoraGguf } from './lora-gguf.js';
export { LORA_TARGETS, type LoraTarget } from './lora.js';
export { promptLogprobsFor, type PromptLogprobs } from './prompt-logprobs.js';
export { type ItemResult, type ModelRunner } from './runner.js';
export { argmax, Sampler } from './sampler.js';
export { describeWeights, type WeightBytes } from './weights-prepared.js';
export { activationBytes } from './activations.js';
export { type SamplingState, type TokenSampler } from './sampling.js';
