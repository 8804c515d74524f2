// The KV transfer protocol's messages: a tagged union whose `type` names are exactly the
// message names in spec/ (the Promela model). Change both together; spec/README.md maps them.
//
// Who sends what (R = router, P = prefill worker, D = decode worker):
//
//   R -> D  Reserve    D admits with its own limits and reserves pages (new epochs)
//   D -> R  Reserved   the destination tags and D's data address   | Rejected (admission)
//   R -> P  Prefill    tokens, sampling, D's address and tags
//   P -> R  Rejected   P's own admission failed (before any page or byte)
//   P -> D  KvChunk    one page's slot range: destination tag, seq, checksum, bytes
//   P -> D  KvDone     tokens covered, digest of all chunks, prompt digest, model fingerprint, first
//                      token (and its log-probabilities when the request asked)
//   D -> P  Ack        D verified coverage + digest; P may free its source pages now
//   D -> R  Tokens     generated token ids with their offset (the first one came in KvDone)
//   D -> R  Finished   normal end (stop / length) with usage
//   * -> R  Failed     honest error for the client (never turned into a success)
//   any     Abort      stop working on rid; the receiver stops writing and replies AbortAck
//   any     AbortAck   the sender will never again write pages of rid
//
// The router also sends Abort to the prefill of a request it ends while prefilling, so a long
// prompt stops computing at once (the prefill then tells decode with an unsolicited AbortAck).
//
// A side that sent Abort keeps pages that a peer may still write *quarantined* until that
// peer's AbortAck or the close of the peer's connection (deferred release).

import type {
  AdapterRef,
  ErrorCode,
  KvDtype,
  RequestId,
  SamplingParams,
  Tag,
  TenantId,
  TokenLogprob,
} from '../core/index.js';

/** Why a request is being aborted, and by whom; carried for metrics ("aborts by phase"). */
export type AbortReason = 'client-disconnect' | 'router' | 'prefill-failed' | 'decode-failed' | 'timeout' | 'shutdown';

export interface Reserve {
  readonly type: 'Reserve';
  readonly rid: RequestId;
  readonly tenant: TenantId;
  readonly promptTokens: number;
  /** Digest of the prompt's token ids; prefill echoes its own in KvDone and decode compares. */
  readonly promptDigest: string;
  readonly sampling: SamplingParams;
  /**
   * The node id (address) of the prefill that will write these pages, chosen by the router
   * before it reserves. Decode accepts KvChunk/KvDone/AbortAck for rid from that peer only,
   * knows whom to tell when it aborts, and knows which requests a closed connection ends.
   */
  readonly prefillAddress: string;
  /**
   * The LoRA adapter the request runs with (absent: the base model), as the router names it: its
   * name and digest. Decode refuses one it does not serve under that digest, and owns the pages
   * under `kvTenantOf(tenant, adapter)` (core/cache-namespace.ts).
   */
  readonly adapter?: AdapterRef;
}

export interface Reserved {
  readonly type: 'Reserved';
  readonly rid: RequestId;
  /** One tag per page, in prompt order: page i holds slots [i*pageSize, (i+1)*pageSize). */
  readonly tags: readonly Tag[];
  readonly pageSize: number;
  /** host:port of D's data listener, where P connects to push KvChunk frames. */
  readonly dataAddress: string;
}

export interface Rejected {
  readonly type: 'Rejected';
  readonly rid: RequestId;
  readonly code: ErrorCode;
  readonly message: string;
}

export interface Prefill {
  readonly type: 'Prefill';
  readonly rid: RequestId;
  readonly tenant: TenantId;
  readonly tokens: readonly number[];
  readonly sampling: SamplingParams;
  readonly decodeAddress: string;
  readonly tags: readonly Tag[];
  readonly pageSize: number;
  /**
   * The router's hint (prefix-routing.ts): a node that holds cached pages of this prompt's prefix
   * for the tenant, to fetch them from (prefix-fetch-*.ts) instead of recomputing. Absent: none.
   */
  readonly prefixHolder?: string;
  /** Reserve's adapter: prefill computes under it (refused when it does not serve that digest), caches under kvTenantOf. */
  readonly adapter?: AdapterRef;
}

export interface KvChunk {
  readonly type: 'KvChunk';
  readonly rid: RequestId;
  /** 0, 1, 2, ... per request; a gap or repeat fails the transfer closed. */
  readonly seq: number;
  /** The destination page and the epoch the sender believes it has. */
  readonly tag: Tag;
  /** Slot range [firstSlot, firstSlot + numSlots) within the page, for every layer. */
  readonly firstSlot: number;
  readonly numSlots: number;
  /** The element type of the payload (the sender's pool's): decode refuses one that is not its own. */
  readonly kvDtype: KvDtype;
  /** xxh64 (16 hex digits) of the payload, seeded with a hash of (rid, seq, tag, slot range):
   *  a payload replayed under another header fails it. See digests.ts. */
  readonly checksum: string;
  readonly payload: Uint8Array;
}

/**
 * A KvChunk as a streaming receiver first sees it: every field but the payload, and the
 * payload's length; the payload follows in pieces (frame-stream.ts). Not a message of its own.
 */
export type KvChunkHead = Omit<KvChunk, 'payload'> & { readonly payloadBytes: number };

export interface KvDone {
  readonly type: 'KvDone';
  readonly rid: RequestId;
  readonly numChunks: number;
  /** Prompt tokens the sender claims its chunks covered; decode trusts its own stamps instead. */
  readonly tokensCovered: number;
  /** Digest over the checksums of all chunks, in seq order. */
  readonly digest: string;
  readonly promptDigest: string;
  /** The fingerprint of the model prefill computed the KV with; decode decodes only with the same model. */
  readonly model: string;
  /** The first generated token, sampled by prefill from the last prompt position's logits. */
  readonly firstToken: number;
  /** Its log-probabilities when the request asked for them (sampling.logprobs), else empty. */
  readonly firstLogprobs: readonly TokenLogprob[];
  /** Prompt tokens prefill's prefix cache supplied (usage's cached_tokens); absent: none. */
  readonly cachedTokens?: number;
  /**
   * sampling.promptLogprobs: prompt tokens 1..n-1's log-probabilities (token 0 has none), computed
   * by prefill's prompt chunks; decode sends them on with its first Tokens. Absent: not asked.
   */
  readonly promptLogprobs?: readonly TokenLogprob[];
  /** The digest of the LoRA adapter prefill computed the KV under; decode decodes only under the same one. Absent: the base model. */
  readonly adapter?: string;
}

export interface Ack {
  readonly type: 'Ack';
  readonly rid: RequestId;
}

export interface Tokens {
  readonly type: 'Tokens';
  readonly rid: RequestId;
  /** Index in the completion of ids[0]: the router refuses a gap, a repeat or a reordering. */
  readonly offset: number;
  readonly ids: readonly number[];
  /** One per id when the request asked for log-probabilities (sampling.logprobs), else empty. */
  readonly logprobs: readonly TokenLogprob[];
  /** With the first Tokens (offset 0): KvDone's promptLogprobs, when the request asked for them. */
  readonly promptLogprobs?: readonly TokenLogprob[];
}

export type FinishReason = 'stop' | 'length';

export interface Finished {
  readonly type: 'Finished';
  readonly rid: RequestId;
  readonly finishReason: FinishReason;
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** KvDone's cachedTokens, passed on for the client's usage; absent: none. */
  readonly cachedTokens?: number;
}

export interface Failed {
  readonly type: 'Failed';
  readonly rid: RequestId;
  readonly code: ErrorCode;
  readonly message: string;
}

export interface Abort {
  readonly type: 'Abort';
  readonly rid: RequestId;
  readonly reason: AbortReason;
}

export interface AbortAck {
  readonly type: 'AbortAck';
  readonly rid: RequestId;
}

export type Message =
  Reserve | Reserved | Rejected | Prefill | KvChunk | KvDone | Ack | Tokens | Finished | Failed | Abort | AbortAck;

export type MessageType = Message['type'];
