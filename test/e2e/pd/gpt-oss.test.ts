// gpt-oss through disaggregated `tessera up`, unchanged: the PD-agreement suite (pd-agreement.ts,
// as moe.test.ts) with gen-model's gpt-oss-tiny, MXFP4 experts (repacked to q8_0 on every node),
// o200k and harmony. Its sinks and sliding-window layers are attention over the same pages (a
// 74-token prompt outgrows the window of 4), so prefill's KV pages, the page checks, KvDone's
// fingerprint (which covers gptOss) and decode need nothing gpt-oss-specific: a prompt's
// log-probabilities and a greedy chat answer are the same, number for number, as co-located serve's.
// Harmony's end tokens may stop the greedy answer before max_tokens, so only its length is looser.
import { pdAgreementSuite } from './pd-agreement.js';

pdAgreementSuite({ name: 'gpt-oss', preset: 'gpt-oss-tiny', dtype: 'mxfp4', chatTokens: 'some' });
