// The cheap check before tokenization: a prompt whose UTF-8 bytes could not fit the context
// even if every token were the vocabulary's longest is refused from its length alone, so no
// request makes a node tokenize (about 0.9 us per byte, on the event loop) megabytes it will
// refuse anyway. And the body limit that follows from it.
// Must never: refuse a prompt that could fit (the bound has a factor 2 for tokenizers that
// normalize text, e.g. collapsing whitespace), or depend on anything but lengths.
import type { ChatMessage, PromptCodec } from '../backend.js';
import { MAX_PROMPTS } from './validate-completion.js';

/** Room for normalization: a tokenizer may drop or merge characters a token's text does not show. */
const NORMALIZATION_FACTOR = 2;

/** The longest token of the vocabulary, in UTF-8 bytes of its text (one pass at start-up). */
export function longestTokenBytes(codec: PromptCodec): number {
  let longest = 1;
  for (let id = 0; id < codec.vocabSize; id++)
    longest = Math.max(longest, Buffer.byteLength(codec.tokenText(id), 'utf8'));
  return longest;
}

/** Most UTF-8 bytes a prompt may have before it is refused untokenized. */
export function maxPromptBytes(contextLength: number, longestToken: number): number {
  return NORMALIZATION_FACTOR * contextLength * longestToken;
}

/**
 * A body limit from the context: MAX_PROMPTS prompts of maxPromptBytes, each byte at worst a
 * 6-character JSON escape, plus 1 MiB for the other fields; never above `ceiling`.
 */
export function bodyLimitFor(promptBytes: number, ceiling: number): number {
  return Math.min(ceiling, MAX_PROMPTS * promptBytes * 6 + (1 << 20));
}

/** vLLM's wording, from the length alone: why `numBytes` of text cannot fit, or null. */
export function promptTooLong(numBytes: number, limitBytes: number, contextLength: number): string | null {
  if (numBytes <= limitBytes) return null;
  return (
    `This model's maximum context length is ${contextLength} tokens. However, your prompt is ${numBytes} bytes long, ` +
    `more than ${limitBytes} bytes could hold in ${contextLength} tokens. Please reduce the length of the prompt.`
  );
}

/**
 * The UTF-8 bytes a chat's messages bring to its prompt: each turn's role, content, reasoning, tool
 * call id and tool calls (id, name, arguments). Linear, and no rendering: what promptTooLong is given.
 */
export function chatBytes(messages: readonly ChatMessage[]): number {
  let numBytes = 0;
  for (const m of messages) {
    numBytes += Buffer.byteLength(m.role) + Buffer.byteLength(m.content, 'utf8');
    if (m.toolCallId !== undefined) numBytes += Buffer.byteLength(m.toolCallId, 'utf8');
    if (m.reasoning !== undefined) numBytes += Buffer.byteLength(m.reasoning, 'utf8');
    for (const c of m.toolCalls ?? [])
      numBytes +=
        Buffer.byteLength(c.id, 'utf8') + Buffer.byteLength(c.name, 'utf8') + Buffer.byteLength(c.arguments, 'utf8');
  }
  return numBytes;
}
