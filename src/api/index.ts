// Layer 4: the OpenAI-compatible HTTP front end (HTTP, SSE, auth, validation, tokenization,
// the context-length check, metrics) and the one table from error codes to HTTP statuses.
export { createApiServer, DEFAULT_MAX_BODY_BYTES, type ApiServer, type ApiServerOptions } from './server.js';
export {
  promptCodecOf,
  type Backend,
  type BackendHealth,
  type BackendStats,
  type ChatMessage,
  type PromptCodec,
} from './backend.js';
export { systemClock, type Clock } from './clock.js';
export {
  errorBody,
  httpStatusOf,
  problemOf,
  type ApiErrorCode,
  type ErrorBody,
  type HttpStatus,
  type Problem,
} from './errors.js';
export {
  ApiMetrics,
  MAX_NAMED_TENANTS,
  OTHER_TENANTS,
  type LimitName,
  type MetricsHook,
  type Outcome,
  type TenantOutcome,
} from './metrics.js';
export { RateLimits, type ApiKeys, type ApiKeySpec, type KeyLimits } from './rate-limit.js';
export { pdMetrics, type PdMetrics } from './metrics-pd.js';
export { DEFAULT_HTTP_LIMITS, type HttpLimits } from './http-guard.js';
export { DASHBOARD_OFF, type DashboardAccess } from './dashboard-route.js';
export {
  handleKvEvents,
  handleKvEventStream,
  KV_EVENTS_MAX_BATCH,
  kvEventsFor,
  wireBatch,
  wireEvent,
  type KvEventsAccess,
} from './kv-events-route.js';
export { routingMetrics, type RoutingSnapshot } from './metrics-routing.js';
export { kvDiskMetrics } from './metrics-kv-disk.js';
export { kvPeerMetrics } from './metrics-kv-peer.js';
export { kvTierMetrics } from './metrics-kv-tiers.js';
export {
  INLINE_BELOW_CHARS,
  inlineTokenizer,
  offloadedTokenizer,
  type PromptTokenizer,
  type TokenizeJob,
} from './prompt-tokenizer.js';
export { REASONING_PARSERS, reasoningParserFor, type ReasoningParserName } from './reasoning.js';
