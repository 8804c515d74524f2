// The tokenizer threads give the inline path's ids bit for bit (Llama 2's SentencePiece vocabulary
// from builtin:tiny, Qwen3's byte-level BPE and chat template with tools from a GGUF), keep short
// prompts moving past long ones (a reserved thread, then shortest first), refuse a full queue and a
// job that waited past the wait bound, survive a thread that dies, and end on close.
// Needs dist/ (`npm run build`): the threads run the built tokenizer-thread-main.js.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultSet, isInvalidRequestError, isTesseraError, NO_FAULTS } from '../core/index.js';
import { genModel } from '../gen/index.js';
import { loadModelInfo, type ModelInfo } from '../model/index.js';
import { promptRecipeOf, TOKENIZER_CRASH_MARKER, type TokenizeJob } from './tokenizer-messages.js';
import { LONG_JOB_CHARS, startTokenizerPool, type TokenizerPool } from './tokenizer-pool.js';
import { RESERVED_MAX_CHARS } from './tokenizer-queue.js';

let dir: string;
let llama: ModelInfo;
let qwen: ModelInfo;
/** Two threads over each vocabulary, and one thread (a short queue, the crash fault armed) over Llama 2's. */
let llamaPool: TokenizerPool;
let qwenPool: TokenizerPool;
let onePool: TokenizerPool;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tessera-tokpool-'));
  llama = await loadModelInfo('builtin:tiny', { cacheDir: dir });
  const recipe = promptRecipeOf(llama.tokenizer, llama.chatTemplate);
  const gguf = join(dir, 'qwen3-tiny.gguf');
  [llamaPool, onePool, qwen] = await Promise.all([
    startTokenizerPool(recipe, { numThreads: 2 }),
    startTokenizerPool(recipe, { numThreads: 1, maxQueuedJobs: 24, faults: new FaultSet(['crash-tokenizer-thread']) }),
    genModel({ preset: 'qwen3-tiny', format: 'gguf', out: gguf, seed: 1 }).then(() => loadModelInfo(gguf)),
  ]);
  qwenPool = await startTokenizerPool(promptRecipeOf(qwen.tokenizer, qwen.chatTemplate), { numThreads: 2 });
}, 120_000);
afterAll(async () => {
  await Promise.all([llamaPool?.close(), onePool?.close(), qwenPool?.close()]);
  await rm(dir, { recursive: true, force: true });
});

function inline(model: ModelInfo, job: TokenizeJob): number[] {
  if (job.kind === 'text') return model.tokenizer.encode(job.text, { addSpecialTokens: job.addSpecialTokens });
  const text = model.chatTemplate.render(job.messages, {
    addGenerationPrompt: job.addGenerationPrompt,
    ...(job.tools === undefined ? {} : { tools: job.tools }),
    escapeText: (t) => model.tokenizer.escapePlain(t), // user text is plain text (tokenizer-plain-text.ts)
  });
  return model.tokenizer.encodeRendered(text, { addSpecialTokens: job.addSpecialTokens });
}

const SPECIALS = ['<s>', '</s>', '<unk>', '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '<tool_call>'];
/** Text with multi-byte UTF-8 (2-, 3- and 4-byte, combining marks, emoji ZWJ), special tokens and odd spaces. */
const textArb = fc
  .array(
    fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.string({ unit: 'binary', maxLength: 20 }),
      fc.constantFrom(...SPECIALS, ' ', '  ', '\n\n', '\t', 'é', 'e\u0301', '日本語', '🙂', '👩‍👩‍👧', '\u00a0', 'ﬁ'),
    ),
    { maxLength: 12 },
  )
  .map((parts) => parts.join(''));

const TOOLS = [
  {
    name: 'get_weather',
    description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
];

const jobArb: fc.Arbitrary<TokenizeJob> = fc.oneof(
  fc.record({
    kind: fc.constant('text' as const),
    text: textArb,
    addSpecialTokens: fc.boolean(),
    cacheScope: fc.constantFrom('a', 'b'),
  }),
  fc.record({
    kind: fc.constant('chat' as const),
    cacheScope: fc.constantFrom('a', 'b'),
    messages: fc.array(
      fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: textArb }, { noNullPrototype: true }),
      { minLength: 1, maxLength: 4 },
    ),
    addGenerationPrompt: fc.boolean(),
    addSpecialTokens: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('chat' as const),
    cacheScope: fc.constantFrom('a', 'b'),
    messages: fc.tuple(textArb, textArb).map(([ask, result]) => [
      { role: 'user', content: ask },
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Zürich"}' }],
      },
      { role: 'tool', content: result, toolCallId: 'call_1' },
    ]),
    addGenerationPrompt: fc.constant(true),
    addSpecialTokens: fc.constant(false),
    tools: fc.constant(TOOLS),
  }),
);

async function outcome(run: () => unknown): Promise<unknown> {
  try {
    return { ids: await run() };
  } catch (error) {
    return { error: isInvalidRequestError(error) ? `invalid: ${error.message}` : String(error) };
  }
}

describe.each([
  ['Llama 2 (builtin:tiny, tokenizer.json)', () => llama, () => llamaPool],
  ['Qwen3 (GGUF, its own chat template)', () => qwen, () => qwenPool],
])('tokenizer threads over %s', (_name, model, threads) => {
  it('give the inline ids (or the same refusal) for any text, chat and tools', async () => {
    await fc.assert(
      fc.asyncProperty(jobArb, async (job) => {
        expect(await outcome(() => threads().tokenize(job))).toEqual(await outcome(() => inline(model(), job)));
      }),
      { numRuns: 150, seed: 17 },
    );
  });

  it('give the inline ids for long prompts, run side by side', async () => {
    const jobs = Array.from({ length: 6 }, (_, i): TokenizeJob => {
      const text = `Chapter ${i}. It is a truth universally acknowledged — 真実 🙂 <|im_end|> </s>\n`.repeat(
        60 + 40 * i,
      );
      return i % 2 === 0
        ? { kind: 'text', text, addSpecialTokens: true, cacheScope: 't' }
        : {
            kind: 'chat',
            cacheScope: 't',
            messages: [{ role: 'user', content: text }],
            addGenerationPrompt: true,
            addSpecialTokens: false,
          };
    });
    const threaded = await Promise.all(jobs.map((job) => threads().tokenize(job)));
    expect(threaded).toEqual(jobs.map((job) => inline(model(), job)));
  });
});

describe('the pool', () => {
  // Long jobs of made-up words (the tokenizer's word cache cannot help), several times the long threshold, so
  // each holds its thread for far longer than twenty short round trips take even on a loaded machine.
  const madeUpWords = (seed: number, chars: number): string => {
    const words: string[] = [];
    let state = seed * 2654435761 + 1;
    for (let length = 0; length < chars;) {
      state = (state * 1103515245 + 12345) % 2147483648;
      const word = state.toString(36);
      words.push(word);
      length += word.length + 1;
    }
    return words.join(' ');
  };
  const long = (i: number): TokenizeJob => ({
    kind: 'text',
    cacheScope: 't',
    text: `${i} ${madeUpWords(i, 4 * LONG_JOB_CHARS)}`,
    addSpecialTokens: true,
  });
  const short = (i: number): TokenizeJob => ({
    kind: 'text',
    text: `short prompt ${i}`,
    addSpecialTokens: true,
    cacheScope: 't',
  });

  /** Submits three long jobs, then twenty short ones; returns the order they were answered in. */
  async function answerOrder(pool: TokenizerPool): Promise<string[]> {
    const order: string[] = [];
    const jobs = [
      ...[0, 1, 2].map((i) => pool.tokenize(long(i)).then(() => order.push(`long ${i}`))),
      ...Array.from({ length: 20 }, (_, i) => pool.tokenize(short(i)).then(() => order.push(`short ${i}`))),
    ];
    await Promise.all(jobs);
    return order;
  }
  const shortsBeforeFirstLong = (order: string[]) =>
    order.slice(0, order.indexOf('long 0')).filter((name) => name.startsWith('short')).length;

  it('answers short prompts while long ones hold the other thread', async () => {
    expect(shortsBeforeFirstLong(await answerOrder(llamaPool))).toBe(20);
  });

  it('(control) with one thread, short prompts wait behind the long one it holds', async () => {
    expect(shortsBeforeFirstLong(await answerOrder(onePool))).toBe(0);
  });

  it('refuses a job `overloaded` when the queue is full, without queueing it', async () => {
    // One job on the thread, 24 waiting: the queue is full until an answer comes back (a later turn).
    const held = Array.from({ length: 25 }, (_, i) => onePool.tokenize(short(i)));
    const refused = await onePool.tokenize(short(25)).catch((error: unknown) => error);
    expect(isTesseraError(refused) && refused.code).toBe('overloaded');
    expect(await Promise.all(held)).toEqual(Array.from({ length: 25 }, (_, i) => inline(llama, short(i))));
  });

  it('fails only the prompt a dying thread held (`internal`), restarts the thread and goes on', async () => {
    const crashing = onePool.tokenize({
      kind: 'text',
      text: `a ${TOKENIZER_CRASH_MARKER} b`,
      addSpecialTokens: true,
      cacheScope: 't',
    });
    const queued = onePool.tokenize(short(1));
    const error = await crashing.catch((e: unknown) => e);
    expect(isTesseraError(error) && error.code).toBe('internal');
    expect(String(error)).toMatch(/tokenizer thread stopped \(exit code 70\).*restarted/);
    expect(await queued).toEqual(inline(llama, short(1)));
    expect(onePool.stats.restarts).toBe(1);
  });

  /** Four long jobs, then one of RESERVED_MAX_CHARS + 4K characters (too long for the reserved thread); the answer order. */
  async function mediumOrder(faults: FaultSet): Promise<string[]> {
    const pool = await startTokenizerPool(promptRecipeOf(llama.tokenizer, llama.chatTemplate), {
      numThreads: 2,
      faults,
    });
    try {
      const order: string[] = [];
      const medium: TokenizeJob = {
        kind: 'text',
        cacheScope: 't',
        text: madeUpWords(99, RESERVED_MAX_CHARS + 4096),
        addSpecialTokens: true,
      };
      await Promise.all([
        ...[0, 1, 2, 3].map((i) => pool.tokenize(long(i)).then(() => order.push(`long ${i}`))),
        pool.tokenize(medium).then(() => order.push('medium')),
      ]);
      return order;
    } finally {
      await pool.close();
    }
  }

  it('answers a medium prompt before the long ones queued ahead of it (shortest first), bar the one running', async () => {
    expect((await mediumOrder(NO_FAULTS)).indexOf('medium')).toBe(1);
  });

  it('(control) with fifo-tokenizer-queue, the medium prompt waits behind every long one', async () => {
    expect((await mediumOrder(new FaultSet(['fifo-tokenizer-queue']))).indexOf('medium')).toBe(4);
  });

  /** A one-thread pool whose wait bound (5 s) is timed by hand: `fire(i)` ends the i-th wait. */
  async function timedPool(faults: FaultSet) {
    const waits: { fired: () => void; cancelled: boolean }[] = [];
    const pool = await startTokenizerPool(promptRecipeOf(llama.tokenizer, llama.chatTemplate), {
      numThreads: 1,
      maxWaitMs: 5_000,
      setTimer: (_ms, fire) => {
        const wait = { fired: fire, cancelled: false };
        waits.push(wait);
        return () => (wait.cancelled = true);
      },
      faults,
    });
    return { pool, waits };
  }

  it('refuses a job `overloaded` once it waited maxWaitMs for a thread, saying what held it up', async () => {
    const { pool, waits } = await timedPool(NO_FAULTS);
    try {
      const running = pool.tokenize(long(7));
      const waiting = pool.tokenize(short(1)).catch((e: unknown) => e);
      expect(waits.map((w) => w.cancelled)).toEqual([true, false]); // the first went to the thread at once
      waits[1]?.fired();
      const error = await waiting;
      expect(isTesseraError(error) && error.code).toBe('overloaded');
      expect(String(error)).toMatch(/waited 5000 ms for a tokenizer thread: 1 thread was busy/);
      expect(pool.stats.queuedJobs).toBe(0);
      expect(await running).toEqual(inline(llama, long(7)));
    } finally {
      await pool.close();
    }
  });

  it('(control) with fifo-tokenizer-queue, nothing bounds the wait', async () => {
    const { pool, waits } = await timedPool(new FaultSet(['fifo-tokenizer-queue']));
    try {
      await Promise.all([pool.tokenize(long(7)), pool.tokenize(short(1))]);
      expect(waits).toHaveLength(0);
    } finally {
      await pool.close();
    }
  });

  it('on close, fails what waits or runs and ends every thread', async () => {
    const running = llamaPool.tokenize(long(0)).catch((e: unknown) => e);
    await llamaPool.close();
    const error = await running;
    expect(isTesseraError(error) && error.code).toBe('overloaded');
    expect(llamaPool.stats).toMatchObject({ numThreads: 0, busyThreads: 0, queuedJobs: 0 });
    const after = await llamaPool.tokenize(short(0)).catch((e: unknown) => e);
    expect(isTesseraError(after) && after.code).toBe('overloaded');
  });
});
