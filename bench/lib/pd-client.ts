// The client side of bench:pd (and bench:soak): one streaming completion timed chunk by chunk,
// percentiles, and the m100 benchmark model (generated once into $TESSERA_HOME/bench/, shared
// with bench:serve and bench:decode).
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type OpenAI from 'openai';
import { genModel } from '../../src/gen/index.js';

export interface RequestResult {
  readonly ttftMs: number;
  /** Gaps between successive chunks that carried tokens. */
  readonly itlMs: number[];
  /** [ms since the phase began, gap] for each ITL sample (the over-time plot). */
  readonly itlAt: [number, number][];
  readonly e2eMs: number;
  readonly outputTokens: number;
}

export async function m100Path(): Promise<string> {
  const home = process.env['TESSERA_HOME'] ?? join(homedir(), '.cache', 'tessera');
  const path = join(home, 'bench', 'm100-f32-seed0.gguf');
  if (!existsSync(path)) {
    process.stderr.write(`generating ${path} ...\n`);
    await mkdir(join(home, 'bench'), { recursive: true });
    await genModel({ preset: 'm100', format: 'gguf', out: path, seed: 0, dtype: 'f32' });
  }
  return path;
}

/** One greedy streaming completion of exactly maxTokens tokens; `t0` is the phase's start. */
export async function oneRequest(
  client: OpenAI,
  prompt: number[],
  maxTokens: number,
  t0: number,
): Promise<RequestResult> {
  const start = performance.now();
  const stream = (await client.completions.create({
    model: 'm100',
    prompt,
    max_tokens: maxTokens,
    temperature: 0,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  } as never)) as unknown as AsyncIterable<OpenAI.Completion>;
  let first: number | undefined;
  let last = start;
  const itlMs: number[] = [];
  const itlAt: [number, number][] = [];
  let outputTokens = 0;
  for await (const chunk of stream) {
    if (chunk.usage) outputTokens = chunk.usage.completion_tokens;
    if ((chunk.choices[0]?.text ?? '') === '') continue;
    const now = performance.now();
    if (first === undefined) first = now;
    else {
      itlMs.push(now - last);
      itlAt.push([now - t0, now - last]);
    }
    last = now;
  }
  const end = performance.now();
  return { ttftMs: (first ?? end) - start, itlMs, itlAt, e2eMs: end - start, outputTokens };
}

const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (rank - lo);
}

export const stats = (xs: readonly number[]) => ({
  mean: mean(xs),
  median: percentile(xs, 50),
  p99: percentile(xs, 99),
});
