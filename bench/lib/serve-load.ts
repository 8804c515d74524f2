// bench:serve's load generator: closed-loop streaming clients (the official openai client) sending
// greedy completions of token-id prompts with ignore_eos to an OpenAI-compatible server, Tessera's
// or llama-server, the same prompts and max_tokens to each; per level the metrics of vLLM's
// benchmark_serving (throughputs; TTFT, TPOT, ITL and end-to-end latency: mean, median, p99) and
// their printout. A request counts only when it streamed to its end and its usage says it generated
// exactly max_tokens; every other request is a failure, counted per message (a server's error, or
// a wrong or missing token count), so a side that fails requests is seen doing less work.
// Benchmark code: it asserts nothing.
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { Rng } from '../../src/core/index.js';

// Every request on a connection of its own (pipelining 0: no keep-alive), to either server. With
// pooled keep-alive connections llama-server (cpp-httplib) closed 2-3 of 64 sockets under the
// client at 16 streams on m100 (undici UND_ERR_SOCKET, "Connection error"), which the bench counts
// as failures and prints NOT LIKE FOR LIKE; a loopback connect per request is the same small cost to both.
const freshConnections = new Agent({ pipelining: 0 });
const freshFetch = ((input: string, init?: object) =>
  undiciFetch(input, { ...init, dispatcher: freshConnections })) as unknown as typeof fetch;

export interface LoadShape {
  readonly inputLen: number;
  readonly outputLen: number;
  readonly promptsPerClient: number;
  /** The `model` field of each request. */
  readonly modelName: string;
}

/** Fields added to every request of one server (bench:serve: llama-server's logit_bias). */
export type ExtraBody = Readonly<Record<string, unknown>>;

interface RequestResult {
  readonly ttftMs: number;
  /** Gaps between successive chunks that carried tokens. */
  readonly itlMs: number[];
  readonly e2eMs: number;
  readonly outputTokens: number;
  readonly inputTokens: number;
}

async function oneRequest(
  client: OpenAI,
  shape: LoadShape,
  prompt: number[],
  extra: ExtraBody,
): Promise<RequestResult> {
  const start = performance.now();
  const stream = (await client.completions.create({
    ...extra,
    model: shape.modelName,
    prompt,
    max_tokens: shape.outputLen,
    temperature: 0,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  } as never)) as unknown as AsyncIterable<OpenAI.Completion>;
  let first: number | undefined;
  let last = start;
  const itlMs: number[] = [];
  let usage: OpenAI.Completion['usage'] | undefined;
  let textChunks = 0;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if ((chunk.choices[0]?.text ?? '') === '') continue;
    textChunks++;
    const now = performance.now();
    if (first === undefined) first = now;
    else itlMs.push(now - last);
    last = now;
  }
  const end = performance.now();
  // Both servers report usage with include_usage; a count other than max_tokens is a failure (not like for like).
  if (usage === undefined) throw new Error(`no usage in the stream (${textChunks} text chunks)`);
  if (usage.completion_tokens !== shape.outputLen)
    throw new Error(`usage.completion_tokens ${usage.completion_tokens}, asked for ${shape.outputLen}`);
  if (usage.prompt_tokens !== prompt.length)
    throw new Error(`usage.prompt_tokens ${usage.prompt_tokens}, sent ${prompt.length}`);
  return {
    ttftMs: (first ?? end) - start,
    itlMs,
    e2eMs: end - start,
    outputTokens: usage.completion_tokens,
    inputTokens: usage.prompt_tokens,
  };
}

const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (rank - lo);
}
const stats = (xs: readonly number[]) => ({ mean: mean(xs), median: percentile(xs, 50), p99: percentile(xs, 99) });

/**
 * One level: `concurrency` clients, each sending promptsPerClient requests one after another
 * (prompts from `seed`: the same for every server), each request with `extra`'s fields added.
 */
export async function runLevel(
  url: string,
  shape: LoadShape,
  concurrency: number,
  seed: number,
  extra: ExtraBody = {},
) {
  const client = new OpenAI({
    baseURL: `${url}/v1`,
    apiKey: 'none',
    maxRetries: 0,
    timeout: 600_000,
    fetch: freshFetch,
  });
  const rng = new Rng(seed);
  const numPrompts = concurrency * shape.promptsPerClient;
  const prompts = Array.from({ length: numPrompts }, () =>
    Array.from({ length: shape.inputLen }, () => 3 + rng.int(31_000)),
  );
  await oneRequest(client, shape, prompts[0] as number[], extra).catch(() => undefined); // warm-up (not counted)
  let next = 0;
  const results: RequestResult[] = [];
  /** Requests the server failed (an error status or an error event in the stream): counted, not timed. */
  const errors: string[] = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < numPrompts) {
        try {
          results.push(await oneRequest(client, shape, prompts[next++] as number[], extra));
        } catch (error) {
          errors.push(error instanceof Error ? error.message : String(error));
        }
      }
    }),
  );
  const durationS = (performance.now() - start) / 1000;
  const failures: Record<string, number> = {};
  for (const e of errors) failures[e] = (failures[e] ?? 0) + 1;
  const totalIn = results.reduce((a, r) => a + r.inputTokens, 0);
  const totalOut = results.reduce((a, r) => a + r.outputTokens, 0);
  const tpot = results.filter((r) => r.outputTokens > 1).map((r) => (r.e2eMs - r.ttftMs) / (r.outputTokens - 1));
  return {
    concurrency,
    completed: results.length,
    failed: errors.length,
    /** The first failure's message (a server's own words). */
    firstError: errors[0] ?? null,
    /** Every failure message and how often it came. */
    failures,
    durationS,
    totalInputTokens: totalIn,
    totalOutputTokens: totalOut,
    requestThroughput: results.length / durationS,
    outputThroughput: totalOut / durationS,
    totalThroughput: (totalIn + totalOut) / durationS,
    ttftMs: stats(results.map((r) => r.ttftMs)),
    tpotMs: stats(tpot),
    itlMs: stats(results.flatMap((r) => r.itlMs)),
    e2eMs: stats(results.map((r) => r.e2eMs)),
  };
}

export type Level = Awaited<ReturnType<typeof runLevel>>;

/** vLLM benchmark_serving's printout of one level. */
export function printLevel(server: string, level: Level): void {
  const line = (label: string, value: string | number) =>
    console.log(`${label.padEnd(40)}${String(value).padStart(10)}`);
  const f = (n: number) => n.toFixed(2);
  const section = (title: string) => console.log(title.padStart(25 + title.length / 2, '-').padEnd(50, '-'));
  console.log(`${` Serving Benchmark Result: ${server} `.padStart(37, '=').padEnd(50, '=')}`);
  line('Successful requests:', level.completed);
  if (level.failed > 0) line('Failed requests:', level.failed);
  for (const [message, n] of Object.entries(level.failures)) console.log(`  ${n} x ${message}`);
  line('Maximum request concurrency:', level.concurrency);
  line('Benchmark duration (s):', f(level.durationS));
  line('Total input tokens:', level.totalInputTokens);
  line('Total generated tokens:', level.totalOutputTokens);
  line('Request throughput (req/s):', f(level.requestThroughput));
  line('Output token throughput (tok/s):', f(level.outputThroughput));
  line('Total Token throughput (tok/s):', f(level.totalThroughput));
  for (const [title, key, name] of [
    ['Time to First Token', 'ttftMs', 'TTFT'],
    ['Time per Output Token (excl. 1st token)', 'tpotMs', 'TPOT'],
    ['Inter-token Latency', 'itlMs', 'ITL'],
    ['End-to-end Latency', 'e2eMs', 'E2EL'],
  ] as const) {
    section(title);
    line(`Mean ${name} (ms):`, f(level[key].mean));
    line(`Median ${name} (ms):`, f(level[key].median));
    line(`P99 ${name} (ms):`, f(level[key].p99));
  }
  console.log('='.repeat(50));
}
