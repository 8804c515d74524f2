// Test support for the worker: a pool, a fake runner and a fake tokenizer small enough to reason
// about by hand. Must never be wired into a real server (src/cli uses src/engine's engine).
//
// The fake "model": the next token after token t is t + 1 (wrapping to FIRST_LETTER after the
// last one), except that END_AFTER is followed by EOS. Token FIRST_LETTER + i reads as the
// i-th letter, so a prompt [A] generates "bcdef..." and stop strings can be placed by hand.
// Like the real runner it checks every page before touching it and stamps what it wrote.
import { assert, isPageCheckError, type BatchItem, type Tag } from '../../core/index.js';
import { Sampler, type ItemResult } from '../../engine/index.js';
import { PagePool } from '../../pages/index.js';
import type { StepRunner, TokenSampler } from '../../engine/index.js';
import type { WorkerTokenizer } from '../colocated.js';
import type { Detokenizer } from '../../core/index.js';

export const BOS = 1;
export const EOS = 2;
export const FIRST_LETTER = 3;
export const VOCAB_SIZE = FIRST_LETTER + 26;
/** The token of a letter ('a' -> 3). */
export const tok = (letter: string): number => FIRST_LETTER + letter.charCodeAt(0) - 97;
/** After 'z' comes EOS. */
export const END_AFTER = tok('z');

export function fakePool(numPages: number, pageSize = 4): PagePool {
  return PagePool.create({ numPages, pageSize, numLayers: 1, numKvHeads: 1, headDim: 1 });
}

export class FakeRunner implements StepRunner {
  readonly pool: PagePool;
  numSteps = 0;
  /** When set, each step waits for it: lets a test act while a step is in flight. */
  gate: Promise<void> | undefined;
  /** When set, the next step throws it (a bug in the runner). */
  throwNext: Error | undefined;
  readonly #logits: Float32Array[] = [];

  constructor(pool: PagePool) {
    this.pool = pool;
  }

  async step(items: readonly BatchItem[]): Promise<ItemResult[]> {
    await (this.gate ?? Promise.resolve());
    if (this.throwNext !== undefined) throw this.throwNext;
    this.numSteps++;
    return items.map((item, i) => this.#one(item, i));
  }

  #one(item: BatchItem, row: number): ItemResult {
    const { pool } = this;
    const who = { rid: item.rid, tenant: item.tenant };
    const end = item.startPos + item.tokens.length;
    try {
      pool.checkWrite(who, item.tags.slice(Math.floor(item.startPos / pool.pageSize), Math.ceil(end / pool.pageSize)));
      pool.checkRead(who, item.tags, item.startPos);
    } catch (error) {
      if (isPageCheckError(error)) return { kind: 'failed', rid: item.rid, error };
      throw error;
    }
    for (let p = Math.floor(item.startPos / pool.pageSize); p * pool.pageSize < end; p++) {
      pool.stamp(item.tags[p] as Tag, Math.min(pool.pageSize, end - p * pool.pageSize));
    }
    if (!item.wantLogits) return { kind: 'computed', rid: item.rid };
    const logits = (this.#logits[row] ??= new Float32Array(VOCAB_SIZE));
    logits.fill(0);
    logits[nextToken(item.tokens.at(-1) as number)] = 10;
    return { kind: 'logits', rid: item.rid, logits, rows: 1 };
  }
}

export function nextToken(token: number): number {
  if (token === END_AFTER) return EOS;
  return token + 1 < VOCAB_SIZE ? token + 1 : FIRST_LETTER;
}

/** Greedy: the largest logit; log-probabilities as the real sampler computes them. */
export const argmaxSampler: TokenSampler = {
  sample(logits) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if ((logits[i] as number) > (logits[best] as number)) best = i;
    return best;
  },
  logprobsOf: (logits, token, topN) => new Sampler(logits.length).logprobsOf(logits, token, topN),
};

/** Letters for letter tokens; BOS/EOS skipped as special tokens. */
export const fakeTokenizer: WorkerTokenizer = {
  createDetokenizer(): Detokenizer {
    return {
      push(id) {
        assert(id >= 0 && id < VOCAB_SIZE, `token ${id}`);
        return id >= FIRST_LETTER ? String.fromCharCode(97 + id - FIRST_LETTER) : '';
      },
      flush: () => '',
    };
  },
};
