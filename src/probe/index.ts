// tessera probe: an auditor of any OpenAI-compatible endpoint for cross-tenant leaks (canary,
// non-interference, prefix-timing, error-honesty, the tier checks, slot-reuse), Tessera, vLLM,
// SGLang, llama-server or Ollama (context-length.ts reads each one's context). An HTTP client
// only: it imports nothing of the server's layers but core.
export { runProbe, type ProbeIo } from './run.js';
export { ProbeConnectionError } from './client.js';
export { verdictTable, progressLine } from './report-text.js';
export { renderHtml } from './report-html.js';
export { ksGreater, ksGreaterTail, effectSize, binomialTail } from './stats.js';
export {
  CHECK_NAMES,
  DEFAULT_CHECKS,
  type CheckName,
  type CheckResult,
  type ProbeOptions,
  type ProbeReport,
} from './types.js';
