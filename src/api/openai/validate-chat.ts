// Body of POST /v1/chat/completions -> a validated ChatCall, or the 400 that names the field.
// Bounds: at most MAX_MESSAGES messages, checked before any message is read (a 400 naming the
// limit). Must never render the template or tokenize: this is shape checking only.
import { InvalidRequestError, NO_FAULTS, type FaultSet } from '../../core/index.js';
import type { ChatMessage, TemplateKwargs } from '../backend.js';
import { readToolCallId, readToolCalls } from './tool-messages.js';
import {
  describe,
  field,
  isObject,
  optionalBool,
  readCommon,
  validating,
  type CommonParams,
  type JsonObject,
  type Validated,
} from './params.js';

/**
 * Most messages one chat may hold. Every template writes a few tokens per turn (ChatML: 5), so
 * this many turns already fill a 40K-token context; more is a flood, not a conversation.
 */
export const MAX_MESSAGES = 10_000;

export interface ChatCall {
  readonly params: CommonParams;
  readonly messages: readonly ChatMessage[];
  /** End the rendered prompt with the assistant turn's opening (vLLM's extension, default true). */
  readonly addGenerationPrompt: boolean;
  /** Let the tokenizer add BOS on top of the template's own (vLLM's extension, default false). */
  readonly addSpecialTokens: boolean;
  /** vLLM's `chat_template_kwargs` (Qwen3's `enable_thinking`); absent when not given. */
  readonly templateKwargs?: TemplateKwargs;
}

/** Most bytes of `chat_template_kwargs` as JSON: a few switches, not a second prompt. */
export const MAX_TEMPLATE_KWARGS_BYTES = 4096;

/** `faults`: only `skip-request-limits` is looked at (params.ts, and MAX_MESSAGES here). */
export function validateChat(body: unknown, faults: FaultSet = NO_FAULTS): Validated<ChatCall> {
  return validating(() => {
    if (!isObject(body))
      throw new InvalidRequestError(`The request body must be a JSON object, got ${describe(body)}.`);
    return {
      // OpenAI deprecated max_tokens for max_completion_tokens; when both are given the new one wins, as in vLLM.
      params: readCommon(body, ['max_completion_tokens', 'max_tokens'], 'chat', faults),
      messages: readMessages(body, faults.has('skip-request-limits') ? Number.POSITIVE_INFINITY : MAX_MESSAGES),
      addGenerationPrompt: optionalBool(body, 'add_generation_prompt') ?? true,
      addSpecialTokens: optionalBool(body, 'add_special_tokens') ?? false,
      ...readTemplateKwargs(field(body, 'chat_template_kwargs')),
    };
  });
}

function readTemplateKwargs(value: unknown): { templateKwargs?: TemplateKwargs } {
  if (value === undefined || value === null) return {};
  const at = 'chat_template_kwargs';
  if (!isObject(value)) throw new InvalidRequestError(`\`${at}\` must be an object, got ${describe(value)}.`, at);
  if (Buffer.byteLength(JSON.stringify(value), 'utf8') > MAX_TEMPLATE_KWARGS_BYTES)
    throw new InvalidRequestError(`\`${at}\` is over ${MAX_TEMPLATE_KWARGS_BYTES} bytes as JSON.`, at);
  const thinking = field(value, 'enable_thinking');
  if (thinking !== undefined && typeof thinking !== 'boolean')
    throw new InvalidRequestError(
      `\`${at}.enable_thinking\` must be a boolean, got ${describe(thinking)}.`,
      `${at}.enable_thinking`,
    );
  return { templateKwargs: value };
}

function readMessages(body: JsonObject, maxMessages: number): ChatMessage[] {
  const value = field(body, 'messages');
  if (value === undefined) throw new InvalidRequestError('`messages` is required.', 'messages');
  if (!Array.isArray(value))
    throw new InvalidRequestError(`\`messages\` must be an array, got ${describe(value)}.`, 'messages');
  if (value.length === 0) throw new InvalidRequestError('`messages` is empty.', 'messages');
  if (value.length > maxMessages)
    throw new InvalidRequestError(
      `\`messages\` holds ${value.length} messages; at most ${maxMessages} are taken in one request.`,
      'messages',
    );
  return value.map((m: unknown, i) => readMessage(m, `messages[${i}]`));
}

function readMessage(value: unknown, at: string): ChatMessage {
  if (!isObject(value)) throw new InvalidRequestError(`\`${at}\` must be an object, got ${describe(value)}.`, at);
  const role = readRole(field(value, 'role'), `${at}.role`);
  const calls = role === 'assistant' ? readToolCalls(field(value, 'tool_calls'), `${at}.tool_calls`) : [];
  const toolCalls = calls.length === 0 ? {} : { toolCalls: calls };
  const toolCallId =
    role === 'tool' ? { toolCallId: readToolCallId(field(value, 'tool_call_id'), `${at}.tool_call_id`) } : {};
  const reasoning =
    role === 'assistant' ? readReasoning(field(value, 'reasoning_content'), `${at}.reasoning_content`) : {};
  const content = field(value, 'content');
  if (content === undefined) {
    // OpenAI allows an assistant turn without content (it then carries tool calls).
    if (role === 'assistant') return { role, content: '', ...toolCalls, ...reasoning };
    throw new InvalidRequestError(`\`${at}.content\` is required.`, `${at}.content`);
  }
  return { role, content: readContent(content, `${at}.content`), ...toolCalls, ...toolCallId, ...reasoning };
}

/** An assistant turn's `reasoning_content` (as chat answers give it back): a string, or null / absent for none. */
function readReasoning(value: unknown, at: string): { reasoning?: string } {
  if (value === undefined) return {};
  if (typeof value !== 'string')
    throw new InvalidRequestError(`\`${at}\` must be a string, got ${describe(value)}.`, at);
  return { reasoning: value };
}

function readRole(value: unknown, at: string): ChatMessage['role'] {
  switch (value) {
    case 'system':
    case 'user':
    case 'assistant':
      return value;
    // OpenAI's newer name for system instructions; chat templates know only `system`.
    case 'developer':
      return 'system';
    case 'tool':
      return value;
    case 'function':
      throw new InvalidRequestError(
        `\`${at}\` = "function" (OpenAI's deprecated functions API) is not supported; use \`tools\` and "tool" messages.`,
        at,
      );
    default:
      throw new InvalidRequestError(
        `\`${at}\` must be one of "system", "user", "assistant", "tool", got ${describe(value)}.`,
        at,
      );
  }
}

/** A string, or text parts joined with newlines (as vLLM joins them). */
function readContent(value: unknown, at: string): string {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) {
    throw new InvalidRequestError(
      `\`${at}\` must be a string or an array of content parts, got ${describe(value)}.`,
      at,
    );
  }
  return value
    .map((part: unknown, j) => {
      const here = `${at}[${j}]`;
      if (!isObject(part)) throw new InvalidRequestError(`\`${here}\` must be an object, got ${describe(part)}.`, here);
      const type = field(part, 'type');
      if (type !== 'text') {
        throw new InvalidRequestError(
          `\`${here}.type\` = ${JSON.stringify(type ?? null)} is not supported; Tessera takes only "text" parts.`,
          `${here}.type`,
        );
      }
      const text = field(part, 'text');
      if (typeof text !== 'string')
        throw new InvalidRequestError(`\`${here}.text\` must be a string, got ${describe(text)}.`, `${here}.text`);
      return text;
    })
    .join('\n');
}
