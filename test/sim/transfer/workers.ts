// The fake workers of the simulation: a prefill host that "computes" a prompt chunk by chunk
// into its pool (each slot's bytes derived from (rid, position)), and a decoder that, before
// every step, runs the real page check and then compares what it reads with the ground truth.
// Both do to the pool exactly what real workers do: checkWrite, write, stamp; checkRead, read.
import {
  isPageCheckError,
  TesseraError,
  type RequestId,
  type SamplingParams,
  type Tag,
} from '../../../src/core/index.js';
import { admissionError, pagesFor, type Owner, type PagePool } from '../../../src/pages/index.js';
import type { AdmitVerdict, PrefillHost } from '../../../src/transfer/index.js';
import { firstForeignPosition, tokenFromPages, writePositions } from './kit.js';

export interface ComputeJob {
  readonly owner: Owner;
  readonly tags: readonly Tag[];
  readonly numTokens: number;
  pos: number;
  stepInFlight: boolean;
  stopping: boolean;
  done: boolean;
}

export interface WorkerHooks {
  /** Schedule the next compute step of rid on this node. */
  scheduleCompute(rid: RequestId): void;
  violation(message: string): void;
}

/** The model fingerprint every simulated node serves (the simulation runs no model). */
export const SIM_MODEL = '5eed5eed5eed5eed';

export class SimPrefillHost implements PrefillHost {
  readonly model = SIM_MODEL;
  readonly jobs = new Map<RequestId, ComputeJob>();

  constructor(
    readonly pool: PagePool,
    readonly contextLength: number,
    readonly hooks: WorkerHooks,
  ) {}

  admit(owner: Owner, tokens: readonly number[], sampling: SamplingParams): AdmitVerdict {
    const limits = {
      contextLength: this.contextLength,
      pageSize: this.pool.pageSize,
      numPages: this.pool.ledger.numPages,
    };
    const refusal = admissionError(limits, 'prefill', tokens.length, sampling.maxTokens);
    if (refusal !== undefined) return { kind: 'rejected', error: refusal };
    const numPages = pagesFor(tokens.length, this.pool.pageSize);
    const result = this.pool.ledger.allocate(numPages, owner);
    if (result.kind === 'out-of-pages')
      return { kind: 'rejected', error: new TesseraError('overloaded', 'prefill pool busy') };
    this.jobs.set(owner.rid, {
      owner,
      tags: result.tags,
      numTokens: tokens.length,
      pos: 0,
      stepInFlight: false,
      stopping: false,
      done: false,
    });
    this.hooks.scheduleCompute(owner.rid);
    return { kind: 'admitted' };
  }

  stop(owner: Owner): 'stopped' | 'stopping' {
    const job = this.jobs.get(owner.rid);
    if (job === undefined) return 'stopped';
    if (job.stepInFlight) {
      job.stopping = true;
      return 'stopping';
    }
    this.#free(job);
    return 'stopped';
  }

  release(owner: Owner): void {
    const job = this.jobs.get(owner.rid);
    if (job === undefined) return this.hooks.violation(`prefill released ${owner.rid}, which holds no pages`);
    if (job.stepInFlight)
      this.hooks.violation(`prefill released ${owner.rid}'s pages while a compute step still writes them`);
    this.#free(job);
  }

  #free(job: ComputeJob): void {
    this.pool.ledger.free(job.tags, job.owner);
    this.jobs.delete(job.owner.rid);
  }

  /** A compute step starts: it will write positions [pos, pos + n) when it ends. */
  startStep(rid: RequestId): ComputeJob | undefined {
    const job = this.jobs.get(rid);
    if (job === undefined || job.stepInFlight || job.stopping || job.done) return undefined;
    job.stepInFlight = true;
    return job;
  }

  /** The step ends: 'stopped' (an abort came meanwhile; pages now back), 'failed', or the new position. */
  endStep(
    rid: RequestId,
    numTokens: number,
    fail: boolean,
  ):
    | { kind: 'stopped' }
    | { kind: 'failed' }
    | { kind: 'progress'; job: ComputeJob; firstToken: number | undefined }
    | undefined {
    const job = this.jobs.get(rid);
    if (job === undefined || !job.stepInFlight) return undefined;
    job.stepInFlight = false;
    if (job.stopping) {
      this.#free(job);
      return { kind: 'stopped' };
    }
    if (fail) {
      this.#free(job);
      return { kind: 'failed' };
    }
    const to = Math.min(job.numTokens, job.pos + numTokens);
    try {
      writePositions(this.pool, job.owner, job.tags, job.pos, to);
    } catch (error) {
      if (!isPageCheckError(error)) throw error;
      this.hooks.violation(`prefill compute of ${rid} found its own pages taken: ${error.message}`);
      return undefined;
    }
    job.pos = to;
    if (to < job.numTokens) return { kind: 'progress', job, firstToken: undefined };
    job.done = true;
    return { kind: 'progress', job, firstToken: tokenFromPages(this.pool, job.tags, job.numTokens, 0) };
  }
}

export interface DecodeJob {
  readonly owner: Owner;
  readonly tags: readonly Tag[];
  readonly promptTokens: number;
  readonly maxTokens: number;
  produced: number;
}

export type DecodeStepResult =
  | { readonly kind: 'token'; readonly id: number; readonly last: boolean }
  | { readonly kind: 'finished' }
  | { readonly kind: 'failed'; readonly error: TesseraError };

/** One decode step: the page check, the ground-truth comparison, then a token from what was read. */
export function decodeStep(
  pool: PagePool,
  job: DecodeJob,
  hooks: WorkerHooks & { read(tags: readonly Tag[]): void },
): DecodeStepResult {
  try {
    pool.checkRead(job.owner, job.tags, job.promptTokens);
  } catch (error) {
    if (isPageCheckError(error)) return { kind: 'failed', error };
    throw error;
  }
  hooks.read(job.tags.slice(0, pagesFor(job.promptTokens, pool.pageSize)));
  const foreign = firstForeignPosition(pool, job.owner.rid, job.tags, job.promptTokens);
  if (foreign >= 0)
    hooks.violation(
      `decode read ${job.owner.rid}'s position ${foreign} from a page not written for it in its epoch (a KV leak: stale, foreign or corrupted bytes)`,
    );
  if (job.produced >= job.maxTokens) return { kind: 'finished' };
  const id = tokenFromPages(pool, job.tags, job.promptTokens, job.produced);
  job.produced++;
  return { kind: 'token', id, last: job.produced >= job.maxTokens };
}
