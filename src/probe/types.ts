// The probe's vocabulary: its options, the checks, what each check found, and the report.
// A check's outcome is a tagged union: clean, finding (a leak, a dishonest status or a timing
// signal: exit 1), or inconclusive (the check could not see what it looks for; never "clean").

export const CHECK_NAMES = [
  'error-honesty',
  'canary',
  'non-interference',
  'prefix-timing',
  'grammar-timing',
  'disk-timing',
  'prefill-timing',
  'response-order',
  'slot-reuse',
] as const;
/** What runs without --checks: the first four (the tier checks cost more and need their server's features). */
export const DEFAULT_CHECKS: readonly CheckName[] = ['error-honesty', 'canary', 'non-interference', 'prefix-timing'];
export type CheckName = (typeof CHECK_NAMES)[number];

export type Tenant = 'A' | 'B';

export interface ProbeOptions {
  readonly baseUrl: string;
  /** Tenant A's and tenant B's API keys (the same key twice: a server without tenants). */
  readonly keys: { readonly A: string; readonly B: string };
  /** undefined: the first model /v1/models lists. */
  readonly model: string | undefined;
  readonly checks: readonly CheckName[];
  /** Scales every check's request budget (1 = the stated budgets). */
  readonly budget: number;
  readonly seed: number;
  /** The operator says the server is batch-invariant (Tessera --deterministic): any change is a finding. */
  readonly batchInvariant: boolean;
  /** Extra JSON merged into every request body (a tenant mechanism, e.g. vLLM's cache_salt). */
  readonly extraBody: { readonly A: Record<string, unknown>; readonly B: Record<string, unknown> };
  readonly requestTimeoutMs: number;
  /** The operator's --context-length: used instead of what the server says (context-length.ts). */
  readonly contextLength?: number;
  /** disk-timing: tokens of fresh prompts sent to push A's prefixes out of the pool (default: disk-timing.ts). */
  readonly evictTokens?: number;
}

/** One request the probe sent, with what came back. */
export interface RequestRecord {
  readonly id: number;
  readonly check: CheckName | 'setup';
  readonly tenant: Tenant;
  readonly method: string;
  readonly path: string;
  /** The body as sent (token-id prompts included). */
  readonly body: unknown;
  readonly purpose: string;
  readonly startMs: number;
  status: number | null;
  /** Time to the first SSE event that carried text (streams only). */
  ttftMs?: number;
  totalMs?: number;
  /** The text of every choice (n > 1: several). */
  texts?: string[];
  /** The first choice's token ids, where the server returns them (vLLM's and Tessera's return_token_ids). */
  tokenIds?: number[];
  error?: string;
  errorBody?: unknown;
  usage?: unknown;
}

export interface Finding {
  readonly what: string;
  /** Request ids that show it. */
  readonly requests: readonly number[];
}

export type CheckStatus = 'clean' | 'finding' | 'inconclusive' | 'error';

export interface Series {
  readonly name: string;
  readonly values: readonly number[];
}

/** What a plot shows: TTFT samples as empirical CDFs, or counts as bars. */
export type Plot =
  | { readonly kind: 'ecdf'; readonly title: string; readonly unit: string; readonly series: readonly Series[] }
  | {
      readonly kind: 'bars';
      readonly title: string;
      readonly unit: string;
      readonly bars: readonly { readonly label: string; readonly value: number }[];
    };

export interface CheckResult {
  readonly check: CheckName;
  readonly status: CheckStatus;
  /** One line for the verdict table. */
  readonly summary: string;
  readonly findings: readonly Finding[];
  /** Every figure the check computed (p-values, counts, thresholds). */
  readonly figures: Record<string, unknown>;
  readonly plots: readonly Plot[];
  readonly numRequests: number;
  readonly budgetRequests: number;
  readonly wallMs: number;
  /** For a check that sizes its prompts to the context: the length it used and where it came from. */
  readonly context?: string;
}

export interface ServerFacts {
  readonly model: string;
  /** The tokens one request may use: what context-length.ts learnt. */
  readonly contextLength: number;
  /** Where contextLength came from, in words ("/props default_generation_settings.n_ctx ..."). */
  readonly contextSource: string;
  /** Requests the server serves at once, where it says (llama-server's /props total_slots). */
  readonly slots?: number;
  /** The most tokens (prompt + max_tokens 1) the server admitted, when below the context (a pool limit); else null. */
  readonly poolLimit: number | null;
  readonly sameKey: boolean;
}

export interface ProbeReport {
  readonly tool: 'tessera probe';
  readonly startedAt: string;
  readonly baseUrl: string;
  readonly options: Omit<ProbeOptions, 'keys'> & { readonly sameKey: boolean };
  readonly server: ServerFacts;
  readonly results: readonly CheckResult[];
  /** 0 nothing found, 1 a leak or a timing signal, 2 no finding but a check could not run (the server stopped answering). */
  readonly exitCode: 0 | 1 | 2;
  readonly requests: readonly RequestRecord[];
}
