// The ports through which the transfer machines use their node's pages and compute.
// Owns: the DecodeHost and PrefillHost interfaces, and LedgerDecodeHost (a decode host over a
// bare PagePool, used by tests and the simulation; a worker adapts its scheduler instead).
// Must never: let a machine allocate or give back pages except through these verbs, or admit a
// request without checking it against this node's own limits first.
//
// Why ports: on a worker the scheduler owns the ledger (it also allocates decode growth pages
// and prefill pages chunk by chunk); the machine decides *when* pages change state, the host
// does it. Each verb is synchronous and maps onto one scheduler call:
//   DecodeHost.reserve -> scheduler.reserve    free -> abort(rid, no peer)    quarantine ->
//   abort(rid, peer may write)    release -> release(rid)     (effect startDecoding -> startDecode)
//   PrefillHost.admit -> scheduler.admit       stop -> abort(rid)            release -> release(rid)
import {
  NO_FAULTS,
  TesseraError,
  type AdapterRef,
  type FaultSet,
  type SamplingParams,
  type Tag,
} from '../core/index.js';
import { admissionError, pagesFor, type Owner, type PagePool } from '../pages/index.js';

export type ReserveVerdict =
  | { readonly kind: 'reserved'; readonly tags: readonly Tag[] }
  | { readonly kind: 'rejected'; readonly error: TesseraError };

export interface DecodeHost {
  /** The pool KV frames are written into: checkWrite, scatterSlots, stamp, isWritten. */
  readonly pool: PagePool;
  /** The fingerprint of the model this node decodes with (src/model's modelFingerprint): KvDone must carry the same. */
  readonly model: string;
  /**
   * Admission with this node's own limits (prompt + maxTokens against its context length and
   * its pool), then pages for positions [0, promptTokens), each with a new epoch, in prompt order.
   * Nothing is allocated when it rejects. `adapter`: the Reserve's LoRA adapter, refused unless
   * this node serves that name under that digest (owner.tenant already carries it: kvTenantOf).
   */
  reserve(owner: Owner, promptTokens: number, sampling: SamplingParams, adapter?: AdapterRef): ReserveVerdict;
  /** allocated -> free: no peer can write these pages any more. */
  free(owner: Owner, tags: readonly Tag[]): void;
  /** allocated -> quarantined: a peer may still write them. */
  quarantine(owner: Owner, tags: readonly Tag[]): void;
  /** quarantined -> free: the peer acknowledged the abort, or its connection closed. */
  release(owner: Owner, tags: readonly Tag[]): void;
}

export type AdmitVerdict = { readonly kind: 'admitted' } | { readonly kind: 'rejected'; readonly error: TesseraError };

export interface PrefillHost {
  /** The pool the prompt's K/V are computed into; the machine gathers chunks from it. */
  readonly pool: PagePool;
  /** The fingerprint of the model this node computes K/V with; KvDone carries it to decode. */
  readonly model: string;
  /**
   * Admission with this node's own limits; when admitted, the node computes the prompt and
   * reports progress (`computed`, `computeDone`, `computeFailed`). Nothing is allocated and
   * nothing computed when it rejects. `adapter`: as DecodeHost.reserve's (computed under it).
   */
  admit(owner: Owner, tokens: readonly number[], sampling: SamplingParams, adapter?: AdapterRef): AdmitVerdict;
  /**
   * Stop computing and give the pages back. 'stopped': done, nothing touches them any more.
   * 'stopping': a step in flight still does; the pages come back when it ends, and the driver
   * then sends `computeStopped`.
   */
  stop(owner: Owner): 'stopped' | 'stopping';
  /** Decode acknowledged the transfer (or stopped waiting for it): give the held pages back. */
  release(owner: Owner): void;
}

export interface LedgerDecodeHostOptions {
  readonly pool: PagePool;
  readonly model: string;
  /** Most positions one request may use on this node: prompt tokens + max_tokens. */
  readonly contextLength: number;
  readonly faults?: FaultSet;
}

/** A DecodeHost straight over a PagePool's ledger: admission, then allocate/free/quarantine/release. */
export class LedgerDecodeHost implements DecodeHost {
  readonly pool: PagePool;
  readonly model: string;
  readonly #contextLength: number;
  readonly #skipAdmission: boolean;

  constructor(options: LedgerDecodeHostOptions) {
    this.pool = options.pool;
    this.model = options.model;
    this.#contextLength = options.contextLength;
    this.#skipAdmission = (options.faults ?? NO_FAULTS).has('skip-admission');
  }

  reserve(owner: Owner, promptTokens: number, sampling: SamplingParams, adapter?: AdapterRef): ReserveVerdict {
    if (adapter !== undefined)
      return {
        kind: 'rejected',
        error: new TesseraError('model_not_found', `this decode serves no LoRA adapter (${adapter.name} asked)`),
      };
    const limits = {
      contextLength: this.#contextLength,
      pageSize: this.pool.pageSize,
      numPages: this.pool.ledger.numPages,
    };
    const verdict = this.#skipAdmission
      ? undefined
      : admissionError(limits, 'decode', promptTokens, sampling.maxTokens);
    if (verdict !== undefined) return { kind: 'rejected', error: verdict };
    const result = this.pool.ledger.allocate(pagesFor(promptTokens, this.pool.pageSize), owner);
    if (result.kind === 'out-of-pages') {
      return {
        kind: 'rejected',
        error: new TesseraError(
          'overloaded',
          `decode pool busy: ${result.numRequested} pages needed, ${result.numFree} free; try again later`,
        ),
      };
    }
    return { kind: 'reserved', tags: result.tags };
  }

  free(owner: Owner, tags: readonly Tag[]): void {
    this.pool.ledger.free(tags, owner);
  }

  quarantine(owner: Owner, tags: readonly Tag[]): void {
    this.pool.ledger.quarantine(tags, owner);
  }

  release(owner: Owner, tags: readonly Tag[]): void {
    this.pool.ledger.release(tags, owner);
  }
}
