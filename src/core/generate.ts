// What a front end (src/api) asks of a back end (a co-located worker, or the PD router), and
// what it gets back: plain data, shared by every layer.
import type { TesseraError } from './errors/index.js';
import type { RequestId, TenantId } from './ids.js';
import type { SamplingParams } from './sampling.js';

export type FinishReason = 'stop' | 'length';

export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Prompt tokens served from the tenant's prefix cache. */
  readonly cachedTokens: number;
  /** Speculative decoding: draft tokens verified for this request, and those accepted (absent when it did not speculate). */
  readonly draftTokens?: number;
  readonly acceptedDraftTokens?: number;
}

export interface GenerateRequest {
  readonly rid: RequestId;
  /** Server-side tenant, from the API key. */
  readonly tenant: TenantId;
  /** Token ids exactly as the model sees them (chat template and BOS already applied). */
  readonly promptTokens: readonly number[];
  readonly sampling: SamplingParams;
  /**
   * An embedding request (/v1/embeddings): prefill only, nothing sampled; it finishes with its
   * last token's final hidden state (`finished.embedding`). Co-located only.
   */
  readonly embed?: true;
  /** The LoRA adapter the request runs with (none: the base model), resolved by the front end. */
  readonly adapter?: AdapterRef;
}

/** A loaded LoRA adapter as a request names it: its name on the engine, and its identity for KV. */
export interface AdapterRef {
  readonly name: string;
  /** A digest of the adapter's file and scale (src/engine's lora-gguf.ts). */
  readonly digest: string;
}

/** What a tenant may see of an adapter by name. */
export type AdapterLookup =
  | { readonly kind: 'found'; readonly ref: AdapterRef }
  /** No such adapter, or one restricted to other tenants (the same answer: its existence is not shown). */
  | { readonly kind: 'unknown' };

/**
 * The LoRA adapters a front end may name: the co-located back end's (src/worker/lora-registry.ts),
 * and the PD router's (the same registry over file digests, no weights).
 */
export interface AdapterDirectory {
  lookup(name: string, tenant: TenantId): AdapterLookup;
  /** The adapters `tenant` may use, by name. */
  list(tenant: TenantId): readonly string[];
  /** Loads a GGUF LoRA file as `name`; `tenants` null: every tenant may use it. */
  load(name: string, path: string, scale: number, tenants: readonly string[] | null): Promise<AdapterRef>;
  /** Unloads `name`: the name is gone for new requests once this resolves ('in-use': refused, nothing changed). */
  unload(name: string): Promise<'unloaded' | 'unknown' | 'in-use'>;
}

/** One of the most likely tokens at a position. */
export interface TopLogprob {
  readonly id: number;
  readonly logprob: number;
}

/** An output token's log-probability, and the most likely tokens at its position (most likely first). */
export interface TokenLogprob {
  readonly logprob: number;
  readonly top: readonly TopLogprob[];
  /** 1 + how many tokens were more likely (vLLM's `rank`; given for a prompt's own log-probabilities). */
  readonly promptRank?: number;
}

export type GenerateEvent =
  /**
   * New tokens, with the text they complete (held back while it could start a stop string or is
   * not valid UTF-8 yet); with `logprobs` (one per id) when the request asked for them.
   */
  | {
      readonly type: 'tokens';
      readonly ids: readonly number[];
      readonly text: string;
      readonly logprobs?: readonly TokenLogprob[];
      /**
       * With the first tokens of a request with sampling.promptLogprobs: one per prompt token, the
       * first null (nothing precedes it), as OpenAI's `echo` and vLLM's `prompt_logprobs` show them.
       */
      readonly promptLogprobs?: readonly (TokenLogprob | null)[];
    }
  | {
      readonly type: 'finished';
      readonly finishReason: FinishReason;
      readonly usage: Usage;
      /** An embedding request's answer: its last token's final hidden state (not normalised). */
      readonly embedding?: Float32Array;
    }
  /** The request failed; nothing after this. Never turned into a success. */
  | { readonly type: 'failed'; readonly error: TesseraError };
