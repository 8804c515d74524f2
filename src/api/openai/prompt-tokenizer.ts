// Where a prompt is rendered and tokenized: on the main thread (`inlineTokenizer`, the reference)
// or on the tokenizer threads (`offloadedTokenizer`, src/tokenizer's TokenizerPool) for all but short
// text, which stays inline because a thread's round trip costs more than encoding it
// (INLINE_BELOW_CHARS; `npm run bench:tokenize` measures both). Both give the same ids, and the
// same errors: an InvalidRequestError when the template refuses the messages.
// Chat is encoded with the codec's encodeChat (user text as plain text, only the template's control
// tokens special) unless `parseSpecialInContent` (the `parse-special-in-content` fault point).
// Every job names its cache scope (the request's tenant): the tokenizer's word cache is one per
// scope, so no tenant's timing tells which words another sent (tokenizer/word-cache.ts), unless
// `sharedWordCache` (the `shared-word-cache` fault point) puts every job in one scope.
// It must never let a long prompt be encoded on the main thread, unless the `inline-tokenize`
// fault point had the composition root pick inlineTokenizer (tests only).
import type { TokenizeJob } from '../../tokenizer/index.js';
import type { PromptCodec } from '../backend.js';

/** Render (chat) and encode: what one request's prompt needs (the tokenizer threads' own job type). */
export type { TokenizeJob };

export interface PromptTokenizer {
  /** The job's ids; rejects with an InvalidRequestError (400), or a TesseraError `overloaded` / `internal`. */
  tokenize(job: TokenizeJob): Promise<readonly number[]>;
}

/** Text below this many UTF-16 units is encoded inline (about 0.2-0.5 ms of work, measured on 2 loaded cores). */
export const INLINE_BELOW_CHARS = 512;

export interface InlineOptions {
  /** Test-only (`parse-special-in-content`): encode the rendered chat as one text, special tokens parsed anywhere. */
  readonly parseSpecialInContent?: boolean;
  /** Test-only (`shared-word-cache`): every job in one word-cache scope, whatever its tenant. */
  readonly sharedWordCache?: boolean;
}

/** The scope every job gets under `shared-word-cache`. */
const SHARED_SCOPE = '*';

function scoped(job: TokenizeJob, options: InlineOptions): TokenizeJob {
  return options.sharedWordCache === true ? { ...job, cacheScope: SHARED_SCOPE } : job;
}

/** Render and encode on the calling thread. */
export function inlineTokenizer(codec: PromptCodec, options: InlineOptions = {}): PromptTokenizer {
  return {
    tokenize: async (job) => encodeInline(codec, scoped(job, options), options),
  };
}

/** Short jobs inline, the rest on `threads` (a TokenizerPool). */
export function offloadedTokenizer(
  threads: PromptTokenizer,
  codec: PromptCodec,
  inlineBelowChars = INLINE_BELOW_CHARS,
  options: InlineOptions = {},
): PromptTokenizer {
  return {
    tokenize: async (job) =>
      jobChars(job) < inlineBelowChars
        ? encodeInline(codec, scoped(job, options), options)
        : threads.tokenize(scoped(job, options)),
  };
}

function encodeInline(codec: PromptCodec, job: TokenizeJob, options: InlineOptions): readonly number[] {
  switch (job.kind) {
    case 'text':
      return codec.encode(job.text, { addSpecialTokens: job.addSpecialTokens, cacheScope: job.cacheScope });
    case 'chat': {
      if (codec.encodeChat !== undefined && options.parseSpecialInContent !== true)
        return codec.encodeChat(job.messages, {
          addGenerationPrompt: job.addGenerationPrompt,
          addSpecialTokens: job.addSpecialTokens,
          cacheScope: job.cacheScope,
          ...(job.tools === undefined ? {} : { tools: job.tools }),
          ...(job.templateKwargs === undefined ? {} : { templateKwargs: job.templateKwargs }),
        });
      const text = codec.renderChat(job.messages, {
        addGenerationPrompt: job.addGenerationPrompt,
        ...(job.tools === undefined ? {} : { tools: job.tools }),
        ...(job.templateKwargs === undefined ? {} : { templateKwargs: job.templateKwargs }),
      });
      return codec.encode(text, { addSpecialTokens: job.addSpecialTokens, cacheScope: job.cacheScope });
    }
  }
}

/**
 * Template text every turn costs beyond what it carries (ChatML writes `<|im_start|>`, the role,
 * newlines and `<|im_end|>`: 26 characters), so a flood of empty turns counts as the work it is.
 */
export const TURN_OVERHEAD_CHARS = 16;

/**
 * What decides inline or not: all the text the job renders and encodes. Chat: every message's
 * role, content, tool call id, and its tool calls (id, name, arguments), plus TURN_OVERHEAD_CHARS
 * per turn and per call, plus the tool schemas. Linear in the job; never renders.
 */
export function jobChars(job: TokenizeJob): number {
  switch (job.kind) {
    case 'text':
      return job.text.length;
    case 'chat': {
      let n = 0;
      for (const m of job.messages) {
        n +=
          TURN_OVERHEAD_CHARS +
          m.role.length +
          m.content.length +
          (m.toolCallId?.length ?? 0) +
          (m.reasoning?.length ?? 0);
        for (const c of m.toolCalls ?? []) n += TURN_OVERHEAD_CHARS + c.id.length + c.name.length + c.arguments.length;
      }
      // Tool schemas are rendered too; count a cheap bound of them only when they are there.
      if (job.tools !== undefined && job.tools.length > 0) n += JSON.stringify(job.tools).length;
      if (job.templateKwargs !== undefined) n += JSON.stringify(job.templateKwargs).length;
      return n;
    }
  }
}
