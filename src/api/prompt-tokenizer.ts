// Where a prompt is rendered and tokenized: on the main thread (`inlineTokenizer`, the reference)
// or on the tokenizer threads (`offloadedTokenizer`, src/model's TokenizerPool) for all but short
// text, which stays inline because a thread's round trip costs more than encoding it
// (INLINE_BELOW_CHARS; `npm run bench:tokenize` measures both). Both give the same ids, and the
// same errors: an InvalidRequestError when the template refuses the messages.
// It must never let a long prompt be encoded on the main thread, unless the `inline-tokenize`
// fault point had the composition root pick inlineTokenizer (tests only).
import type { ChatMessage, PromptCodec, ToolFunction } from './backend.js';

/** Render (chat) and encode: what one request's prompt needs. */
export type TokenizeJob =
  | { readonly kind: 'text'; readonly text: string; readonly addSpecialTokens: boolean }
  | {
      readonly kind: 'chat';
      readonly messages: readonly ChatMessage[];
      readonly addGenerationPrompt: boolean;
      readonly addSpecialTokens: boolean;
      readonly tools?: readonly ToolFunction[];
    };

export interface PromptTokenizer {
  /** The job's ids; rejects with an InvalidRequestError (400), or a TesseraError `overloaded` / `internal`. */
  tokenize(job: TokenizeJob): Promise<readonly number[]>;
}

/** Text below this many UTF-16 units is encoded inline (about 0.2-0.5 ms of work, measured on 2 loaded cores). */
export const INLINE_BELOW_CHARS = 512;

/** Render and encode on the calling thread. */
export function inlineTokenizer(codec: PromptCodec): PromptTokenizer {
  return {
    tokenize: async (job) => encodeInline(codec, job),
  };
}

/** Short jobs inline, the rest on `threads` (a TokenizerPool). */
export function offloadedTokenizer(
  threads: PromptTokenizer,
  codec: PromptCodec,
  inlineBelowChars = INLINE_BELOW_CHARS,
): PromptTokenizer {
  return {
    tokenize: async (job) => (jobChars(job) < inlineBelowChars ? encodeInline(codec, job) : threads.tokenize(job)),
  };
}

function encodeInline(codec: PromptCodec, job: TokenizeJob): readonly number[] {
  switch (job.kind) {
    case 'text':
      return codec.encode(job.text, { addSpecialTokens: job.addSpecialTokens });
    case 'chat': {
      const text = codec.renderChat(job.messages, {
        addGenerationPrompt: job.addGenerationPrompt,
        ...(job.tools === undefined ? {} : { tools: job.tools }),
      });
      return codec.encode(text, { addSpecialTokens: job.addSpecialTokens });
    }
  }
}

/** What decides inline or not: the text (chat: every message's content, tool arguments, tool schemas). */
function jobChars(job: TokenizeJob): number {
  switch (job.kind) {
    case 'text':
      return job.text.length;
    case 'chat': {
      let n = 0;
      for (const m of job.messages) {
        n += m.content.length;
        for (const c of m.toolCalls ?? []) n += c.arguments.length + c.name.length;
      }
      // Tool schemas are rendered too; count a cheap bound of them only when they are there.
      if (job.tools !== undefined && job.tools.length > 0) n += JSON.stringify(job.tools).length;
      return n;
    }
  }
}
