// Tool turns in a chat history: an assistant message's `tool_calls` and a tool message's
// `tool_call_id`, checked and reduced to what the chat template needs. Shape checking only.
import { InvalidRequestError } from '../../core/index.js';
import type { ChatMessage } from '../backend.js';
import { describe, field, isObject } from './params.js';

type ToolCall = NonNullable<ChatMessage['toolCalls']>[number];

export function readToolCalls(value: unknown, at: string): ToolCall[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new InvalidRequestError(`\`${at}\` must be an array, got ${describe(value)}.`, at);
  return value.map((call: unknown, i): ToolCall => {
    const here = `${at}[${i}]`;
    if (!isObject(call)) throw new InvalidRequestError(`\`${here}\` must be an object, got ${describe(call)}.`, here);
    const fn = field(call, 'function');
    if (!isObject(fn))
      throw new InvalidRequestError(`\`${here}.function\` must be an object, got ${describe(fn)}.`, `${here}.function`);
    const name = field(fn, 'name');
    const args = field(fn, 'arguments') ?? '{}';
    if (typeof name !== 'string' || name === '')
      throw new InvalidRequestError(`\`${here}.function.name\` must be a non-empty string.`, `${here}.function.name`);
    if (typeof args !== 'string')
      throw new InvalidRequestError(
        `\`${here}.function.arguments\` must be a string of JSON, got ${describe(args)}.`,
        `${here}.function.arguments`,
      );
    const id = field(call, 'id');
    return { id: typeof id === 'string' ? id : `call_${i}`, name, arguments: args };
  });
}

export function readToolCallId(value: unknown, at: string): string {
  if (typeof value !== 'string' || value === '')
    throw new InvalidRequestError(
      `\`${at}\` must be the id of the call this message answers, got ${describe(value)}.`,
      at,
    );
  return value;
}
