// The decode machine's vocabulary: states, inputs, effects, options, stats, per-request records.
// Must never: hold behaviour; decode-machine.ts acts on these.
import type { RequestId, SamplingParams, Tag, TesseraError, TokenLogprob } from '../core/index.js';
import type { Owner } from '../pages/index.js';
import type { TransferDigest } from './digests.js';
import type { DecodeHost } from './hosts.js';
import type { ChunkInput, Deadline, MachineOptions, NetworkEffect, NetworkInput, PeerId } from './machine.js';
import type { FinishReason } from './messages.js';

export const DECODE_STATES = ['AwaitingKv', 'Receiving', 'Decoding', 'Aborting', 'Finished', 'Released'] as const;
export type DecodeState = (typeof DECODE_STATES)[number];

export type DecodeInput =
  | NetworkInput
  | ChunkInput
  /** The decoder produced these tokens for rid (the machine sends KvDone's first token before them). */
  | {
      readonly kind: 'decodeTokens';
      readonly rid: RequestId;
      readonly ids: readonly number[];
      /** One per id when asked for; else empty. */ readonly logprobs: readonly TokenLogprob[];
    }
  /** The decoder ended rid normally and gave its pages back. */
  | { readonly kind: 'decodeFinished'; readonly rid: RequestId; readonly finishReason: FinishReason }
  /** The decoder ended rid with an error (a page check, out of pages, ...) and gave its pages back. */
  | { readonly kind: 'decodeFailed'; readonly rid: RequestId; readonly error: TesseraError };

export type DecodeEffect =
  | NetworkEffect
  /** The transfer is verified: decode rid from position promptTokens with firstToken. The pages are the decoder's now. */
  | {
      readonly kind: 'startDecoding';
      readonly rid: RequestId;
      readonly owner: Owner;
      readonly tags: readonly Tag[];
      readonly promptTokens: number;
      readonly firstToken: number;
      readonly sampling: SamplingParams;
      /** From the first landed frame to KvDone (the transfer-time metric); null when no frame came. */
      readonly transferMs: number | null;
    }
  /** Stop decoding rid and give its pages back (now, or when the step in flight ends). */
  | { readonly kind: 'stopDecoding'; readonly rid: RequestId; readonly error: TesseraError };

/** `node` is also decode's advertised data address (where prefill sends KvChunk). */
export interface DecodeMachineOptions extends MachineOptions {
  readonly host: DecodeHost;
}

export interface DecodeStats {
  reserved: number;
  rejected: number;
  transfersVerified: number;
  transfersFailed: number;
  framesWritten: number;
  framesDropped: number;
  checksumFailures: number;
  bytesWritten: number;
  /** Requests aborted (by anyone), by the state they were in. */
  abortsByState: Record<string, number>;
  /** Aborts never acknowledged after every retry: the writer's connection was closed (if it had one). */
  writersDeclaredDead: number;
  /** ... of which the writer had never connected (it never got the request, or died first). */
  writersNeverConnected: number;
}

export interface Active {
  readonly rid: RequestId;
  readonly owner: Owner;
  readonly router: PeerId;
  readonly writer: PeerId;
  readonly promptTokens: number;
  readonly promptDigest: string;
  readonly sampling: SamplingParams;
  readonly tags: readonly Tag[];
  readonly digest: TransferDigest;
  /** The digest of Reserve's LoRA adapter (absent: the base model): KvDone must carry the same. */
  readonly adapter?: string;
  state: 'AwaitingKv' | 'Receiving' | 'Decoding' | 'Aborting';
  /** What our ledger holds for this request before decoding: allocated, quarantined, or nothing (free-before-ack). */
  pages: 'allocated' | 'quarantined' | 'none';
  nextSeq: number;
  wait: Deadline | undefined;
  abortRetries: number;
  writerTold: boolean;
  /** A frame of this request came on the writer's current connection: that connection closing ends it. */
  bound: boolean;
  /** No AbortAck after every retry: closePeer(writer) was asked for; the close releases the pages. */
  declaredDead: boolean;
  firstToken: number;
  /** firstToken's log-probabilities (KvDone's), when the request asked for them. */
  firstLogprobs: readonly TokenLogprob[];
  /** KvDone's promptLogprobs, sent on with the first Tokens; undefined: not asked. */
  promptLogprobs?: readonly TokenLogprob[];
  /** KvDone's cachedTokens (prefill's prefix cache), reported in Finished. */
  cachedTokens: number;
  tokensSent: number;
  /** When the first frame landed (the machine's clock), for startDecoding's transferMs. */
  firstFrameAtMs: number | undefined;
  /** KV payload bytes landed and verified so far (the dashboard's transfer progress). */
  bytes: number;
  /** Why it was aborted while receiving (the dashboard's quarantine reason); undefined before. */
  abortWhy: string | undefined;
}

export interface Tombstone {
  readonly state: 'Finished' | 'Released';
  readonly writer: PeerId | undefined;
  /** The writer may not know the request ended: tell it with Abort when a frame of it arrives. */
  abortOwed: boolean;
  readonly expiresAtMs: number;
}
