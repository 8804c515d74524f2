// Layer 4: the OpenAI-compatible HTTP front end (HTTP, SSE, auth, validation, tokenization,
// the context-length check, metrics) and the one table from error codes to HTTP statuses.
export { createApiServer, DEFAULT_MAX_BODY_BYTES, type ApiServer, type ApiServerOptions } from './http/server.js';
export {
  promptCodecOf,
  type Backend,
  type BackendHealth,
  type BackendStats,
  type ChatMessage,
  type PromptCodec,
} from './backend.js';
export { systemClock, type Clock } from './http/clock.js';
export {
  errorBody,
  httpStatusOf,
  problemOf,
  type ApiErrorCode,
  type ErrorBody,
  type HttpStatus,
  type Problem,
} from './http/errors.js';
export {
  ApiMetrics,
  MAX_NAMED_TENANTS,
  OTHER_TENANTS,
  type LimitName,
  type MetricsHook,
  type Outcome,
  type TenantOutcome,
} from './ops/metrics.js';
export { RateLimits, type ApiKeys, type ApiKeySpec, type KeyLimits } from './http/rate-limit.js';
export { pdMetrics, type PdMetrics } from './ops/metrics-pd.js';
export { DEFAULT_HTTP_LIMITS, type HttpLimits } from './http/http-guard.js';
export { DASHBOARD_OFF, type DashboardAccess } from './ops/dashboard-route.js';
export { loraAdminAccess, type LoraAdminAccess } from './openai/lora-admin-route.js';
export {
  handleKvEvents,
  handleKvEventStream,
  KV_EVENTS_MAX_BATCH,
  kvEventsFor,
  wireBatch,
  wireEvent,
  type KvEventsAccess,
} from './ops/kv-events-route.js';
export { routingMetrics, type RoutingSnapshot } from './ops/metrics-routing.js';
export { kvDiskMetrics } from './ops/metrics-kv-disk.js';
export { kvPeerMetrics } from './ops/metrics-kv-peer.js';
export { kvTierMetrics } from './ops/metrics-kv-tiers.js';
export {
  INLINE_BELOW_CHARS,
  inlineTokenizer,
  offloadedTokenizer,
  type PromptTokenizer,
  type TokenizeJob,
} from './openai/prompt-tokenizer.js';
export { REASONING_PARSERS, reasoningParserFor, type ReasoningParserName } from './openai/reasoning.js';
