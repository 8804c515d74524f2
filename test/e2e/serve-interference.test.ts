// Non-interference between tenants, as a test any run can make: with --deterministic, a greedy
// request of tenant alice generates the same output alone as it does among 15 concurrent
// requests of tenant bob (long and short prompts, chunked prefills beside its decode steps, some
// aborted midway). The token ids are compared exactly (vLLM's `return_token_ids`), and the text.
//
// Negative control: `swap-batch-rows` (the worker hands each batched item its neighbour's
// logits). Alone, a request is a batch of one and the fault changes nothing; among others it
// must change alice's output, or this test could not fail.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/index.js';
import { promptIds, startServer, useTestHome, writeJson, type Server } from './support/process.js';

const home = useTestHome();
let keysFile: string;
const ARGS = [
  '--deterministic',
  '--context-length',
  '512',
  '--kv-pages',
  '192',
  '--max-running-requests',
  '16',
  '--chunked-prefill-size',
  '128',
];
const TARGET = {
  model: 'builtin:tiny',
  prompt: promptIds(40, 11000),
  max_tokens: 32,
  temperature: 0,
  ignore_eos: true,
  return_token_ids: true,
};

beforeAll(async () => {
  keysFile = await writeJson(home.dir, 'keys.json', { 'sk-alice': 'alice', 'sk-bob': 'bob' });
});

interface Output {
  readonly ids: readonly number[];
  readonly text: string;
  readonly completionTokens: number;
}

async function streamed(
  client: OpenAI,
  body: object,
  signal?: AbortSignal,
  onChunk?: (n: number) => void,
): Promise<Output> {
  const stream = (await client.completions.create(
    { ...body, stream: true, stream_options: { include_usage: true } } as never,
    signal ? { signal } : {},
  )) as unknown as AsyncIterable<OpenAI.Completion>;
  const ids: number[] = [];
  let text = '';
  let completionTokens = 0;
  let n = 0;
  for await (const chunk of stream) {
    ids.push(...((chunk.choices[0] as { token_ids?: number[] } | undefined)?.token_ids ?? []));
    text += chunk.choices[0]?.text ?? '';
    completionTokens = chunk.usage?.completion_tokens ?? completionTokens;
    onChunk?.(++n);
  }
  return { ids, text, completionTokens };
}

/** alice's target while 15 requests of bob run; bob's are started first, some aborted midway. */
async function amongOthers(server: Server, seed: number): Promise<Output> {
  const rng = new Rng(seed);
  const bob = server.client('sk-bob');
  let numStreaming = 0;
  let allStreaming: () => void = () => undefined;
  const enough = new Promise<void>((resolve) => (allStreaming = resolve));
  const others = Array.from({ length: 15 }, async (_, i) => {
    const long = i % 3 === 0;
    const body = {
      model: 'builtin:tiny',
      prompt: promptIds(long ? 200 + rng.int(200) : 4 + rng.int(30), 13000 + 500 * i),
      max_tokens: 40 + rng.int(60),
      temperature: i % 2 === 0 ? 0 : 0.8,
      seed: i,
      ignore_eos: true,
    };
    const controller = new AbortController();
    const abortAfter = i % 4 === 1 ? 3 + rng.int(10) : Infinity;
    try {
      await streamed(bob, body, controller.signal, (n) => {
        if (n === 1 && ++numStreaming >= 10) allStreaming();
        if (n >= abortAfter) controller.abort();
      });
    } catch (error) {
      if (!(error instanceof OpenAI.APIUserAbortError)) throw error;
    }
  });
  await Promise.race([enough, Promise.all(others)]);
  const target = await streamed(server.client('sk-alice'), TARGET);
  await Promise.all(others);
  return target;
}

describe('non-interference with --deterministic', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(['--api-keys', keysFile, ...ARGS], home.dir);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a greedy request generates the same tokens alone and among 15 requests of another tenant', async () => {
    const alone = await streamed(server.client('sk-alice'), TARGET);
    expect(alone.completionTokens).toBe(32);
    expect(alone.ids).toHaveLength(32);
    const crowded = await amongOthers(server, 1);
    expect(crowded).toEqual(alone);
    const again = await amongOthers(server, 2);
    expect(again).toEqual(alone);
  });
});

describe('negative control: swap-batch-rows', () => {
  let good: Server;
  let faulty: Server;
  beforeAll(async () => {
    [good, faulty] = await Promise.all([
      startServer(['--api-keys', keysFile, ...ARGS], home.dir),
      startServer(['--api-keys', keysFile, ...ARGS], home.dir, {
        TESSERA_ALLOW_FAULTS: '1',
        TESSERA_FAULT: 'swap-batch-rows',
      }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([good?.stop(), faulty?.stop()]);
  });

  it('changes nothing for a request alone, and changes its output among others: the test above can fail', async () => {
    const alone = await streamed(good.client('sk-alice'), TARGET);
    expect(await streamed(faulty.client('sk-alice'), TARGET)).toEqual(alone);
    const crowded = await amongOthers(faulty, 1);
    expect(crowded.completionTokens).toBe(32);
    expect(crowded.ids).toHaveLength(32);
    expect(crowded.ids).not.toEqual(alone.ids);
  });
});
