// What every check gets: the client, the server's facts, its own seeded Rng, its request
// budget and a progress callback; and what every check returns.
import type { Rng } from '../core/index.js';
import type { ProbeClient } from './client.js';
import type { CheckResult, ServerFacts } from './types.js';

export interface CheckContext {
  readonly client: ProbeClient;
  readonly facts: ServerFacts;
  readonly rng: Rng;
  /** Requests this check may send. */
  readonly budget: number;
  readonly batchInvariant: boolean;
  /** disk-timing's fill, when the operator gave it (--evict-tokens). */
  readonly evictTokens?: number;
  readonly progress: (done: number, total: number) => void;
}

export type CheckOutput = Pick<CheckResult, 'status' | 'summary' | 'findings' | 'figures' | 'plots'>;

/** The longest prompt + max_tokens this server serves: its context, or the pool limit it admitted to. */
export function usableTokens(facts: ServerFacts): number {
  return Math.min(facts.contextLength, facts.poolLimit ?? Number.POSITIVE_INFINITY);
}

/** Greedy completion parameters every check shares (OpenAI's own fields only). */
export function greedy(model: string, prompt: readonly number[] | string, maxTokens: number): Record<string, unknown> {
  return {
    model,
    prompt: typeof prompt === 'string' ? prompt : [...prompt],
    max_tokens: maxTokens,
    temperature: 0,
    seed: 1234,
  };
}

/** Runs tasks with at most `limit` in flight; resolves with their results in order. */
export async function inParallel<T>(tasks: readonly (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await (tasks[i] as () => Promise<T>)();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}
