// Layer 3: the step loop of each worker role and the timers it owns. colocated: one process,
// one pool (`tessera serve`); engine-loop.ts is the loop every role shares.
export { LoraRegistry } from './lora-registry.js';
export { ColocatedWorker, type ColocatedWorkerOptions, type WorkerTokenizer } from './colocated.js';
export { PrefillWorker } from './prefill-worker.js';
export { DecodeWorker } from './decode-worker.js';
export { HookedRunner, type StepHooks } from './hooked-runner.js';
export type { PdWorkerOptions } from './pd-common.js';
export { DEFAULT_KV_DISK_BYTES, DiskTier, type DiskTierOptions } from './disk-tier.js';
export { CountedPrefixCache, setTierSource, tiersOf } from './tier-views.js';
export { schedulerFor } from './scheduler-for.js';
