// A mixture-of-experts model through disaggregated `tessera up`, unchanged: the PD-agreement suite
// (pd-agreement.ts: PD against co-located `tessera serve`, both --deterministic) with gen-model's
// qwen3moe-tiny in q8_0 (16 experts, 4 per token; Qwen3's tokenizer and chat template). Prefill's
// KV pages, the page checks, KvDone's fingerprint (which covers the routing config) and decode need
// nothing MoE-specific: a prompt's log-probabilities and a greedy chat answer are the same, number
// for number, as co-located serve's.
import { pdAgreementSuite } from './pd-agreement.js';

pdAgreementSuite({ name: 'qwen3moe', preset: 'qwen3moe-tiny', dtype: 'q8_0', chatTokens: 'all' });
