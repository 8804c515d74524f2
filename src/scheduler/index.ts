// Layer 2: the scheduler — admission before allocation, tenant queues served in fair-share order (virtual token counters), continuous
// batching with chunked prefill, preemption by recompute, aborts, and the roles of
// disaggregated serving. Pure and synchronous; imports only src/core and src/pages.
export { Scheduler, type PeerWrites } from './scheduler.js';
export { TenantQueues, type Queued } from './queue.js';
export { DEFAULT_FAIR_SHARE, TenantCounters, type FairCandidate, type FairShareWeights } from './fair-share.js';
export {
  itemPairs,
  StepBudget,
  StepCostModel,
  tokenCap,
  type PrefillLimit,
  type StepBudgetOptions,
  type StepCostFit,
  type StepShape,
} from './step-budget.js';
export { REQUEST_STATE_KINDS, ROLES } from './types.js';
export {
  DEFAULT_SPEC,
  DraftState,
  NgramIndex,
  perTokenAcceptance,
  type DraftCandidate,
  type SpecOptions,
} from './spec-lookup.js';
export { bestDraftLength } from './spec-cost.js';
export type {
  AbortResult,
  AdmitResult,
  DraftVerdict,
  FinishResult,
  ReleaseResult,
  RequestStateKind,
  RequestView,
  ReserveResult,
  Role,
  SchedulerEvent,
  SchedulerOptions,
  StartDecodeResult,
  StepPlan,
  StepResult,
} from './types.js';
