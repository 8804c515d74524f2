// Layer 3: the PD router: the pure pair policy and cluster admission (pair-policy.ts), the
// registry of workers learned from their /health, and PdRouter, the back end `tessera router`
// puts behind the OpenAI front end, relaying each request through the RouterMachine.
export { clusterAdmission, pickPair, type WorkerLimits, type WorkerRole, type WorkerView } from './pair-policy.js';
export {
  WorkerRegistry,
  type WorkerEntry,
  type WorkerRegistryOptions,
  type WorkerState,
  type WorkerTotals,
} from './workers.js';
export { ClientStream } from './client-stream.js';
export { RouterMetrics } from './router-metrics.js';
export {
  Discovery,
  joinCheck,
  parseDnsTarget,
  systemResolveA,
  type DnsTarget,
  type DiscoveryStats,
  type ResolveA,
} from './discovery.js';
export { PdRouter, type PdRouterOptions } from './pd-router.js';
export { ClusterLora, type ClusterLoraOptions } from './cluster-lora.js';
