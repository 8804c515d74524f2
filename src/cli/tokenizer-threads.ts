// Every serving process's prompt tokenizer: src/tokenizer's TokenizerPool (threads built from the
// loaded model's tokenizer and template) behind src/api's offloadedTokenizer, and its close().
// The `inline-tokenize` fault point keeps tokenization on the main thread (tests only: the
// negative control of test/e2e/serve-tokenize.test.ts).
import { offloadedTokenizer, inlineTokenizer, type PromptCodec, type PromptTokenizer } from '../api/index.js';
import type { FaultSet } from '../core/index.js';
import { promptRecipeOf, startTokenizerPool, type ChatTemplate, type Tokenizer } from '../tokenizer/index.js';

/**
 * Two threads: one keeps to short prompts, so a huge one never holds up the rest (tokenizer-pool.ts).
 * On a 2-core machine that is as much tokenization as the cores hold beside the main and engine threads.
 */
export const DEFAULT_TOKENIZER_THREADS = 2;

/**
 * Longest a prompt waits for a tokenizer thread before it is refused 503 `overloaded` (saying
 * how much waited ahead of it): a backlog of huge prompts turns into honest errors, not minutes.
 */
export const DEFAULT_TOKENIZER_WAIT_MS = 15_000;

/** Node's timer, unref'd: a pending wait never keeps a process alive. */
function setTimer(ms: number, fire: () => void): () => void {
  const timer = setTimeout(fire, ms);
  timer.unref();
  return () => clearTimeout(timer);
}

export interface PromptTokenizing {
  readonly tokenizer: PromptTokenizer;
  /** For the start-up log. */
  readonly description: string;
  /** Ends the threads (after the API server closed). */
  close(): Promise<void>;
}

export async function startPromptTokenizing(
  model: { readonly tokenizer: Tokenizer; readonly chatTemplate: ChatTemplate },
  codec: PromptCodec,
  faults: FaultSet,
  numThreads = DEFAULT_TOKENIZER_THREADS,
): Promise<PromptTokenizing> {
  const inline = {
    parseSpecialInContent: faults.has('parse-special-in-content'),
    sharedWordCache: faults.has('shared-word-cache'),
  };
  if (faults.has('inline-tokenize'))
    return {
      tokenizer: inlineTokenizer(codec, inline),
      description: 'prompts tokenized on the main thread (fault inline-tokenize)',
      close: async () => undefined,
    };
  const pool = await startTokenizerPool(promptRecipeOf(model.tokenizer, model.chatTemplate), {
    numThreads,
    faults,
    maxWaitMs: DEFAULT_TOKENIZER_WAIT_MS,
    setTimer,
  });
  return {
    tokenizer: offloadedTokenizer(pool, codec, undefined, inline),
    description: `${numThreads} tokenizer thread${numThreads === 1 ? '' : 's'}`,
    close: () => pool.close(),
  };
}
