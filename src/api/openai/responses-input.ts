// POST /v1/responses body -> chat turns, tools and structured-output format: the subset vLLM
// serves. `input` is a string (one user turn) or a list of items: messages ({role, content} with
// string content or input_text/output_text parts; type "message" optional), function_call
// items (merged into the assistant turn before them) and function_call_output items (tool
// turns). `instructions` becomes the first system turn. `store` and `metadata` are accepted and
// ignored (Tessera keeps no responses), so `previous_response_id` is refused.
// Bounds: at most MAX_INPUT_ITEMS items (a 400 naming the limit, checked before any item is
// read), and reading is linear in the items: consecutive function_call items are appended to
// one assistant turn's list in place, never copied per item.
// Shape checking only: must never render, tokenize or compile.
import { InvalidRequestError, type ConstraintSpec } from '../../core/index.js';
import type { ChatMessage } from '../backend.js';
import { describe, field, isObject, type JsonObject } from './params.js';
import { schemaText } from './response-format.js';
import { MAX_MESSAGES } from './validate-chat.js';

/** Most items one `input` may hold: the same bound as chat's `messages`. */
export const MAX_INPUT_ITEMS = MAX_MESSAGES;

type ToolCall = NonNullable<ChatMessage['toolCalls']>[number];

/** The turns being read; an assistant turn's calls stay a growing array until the end. */
type Turn = ChatMessage & { calls?: ToolCall[] };

export function readResponsesMessages(body: JsonObject): ChatMessage[] {
  if (field(body, 'previous_response_id') !== undefined) {
    throw new InvalidRequestError(
      '`previous_response_id` is not supported: Tessera stores no responses (`store` is ignored); send the whole conversation as `input`.',
      'previous_response_id',
    );
  }
  const messages: ChatMessage[] = [];
  const instructions = field(body, 'instructions');
  if (instructions !== undefined) {
    if (typeof instructions !== 'string')
      throw new InvalidRequestError(
        `\`instructions\` must be a string, got ${describe(instructions)}.`,
        'instructions',
      );
    messages.push({ role: 'system', content: instructions });
  }
  const input = field(body, 'input');
  if (input === undefined) throw new InvalidRequestError('`input` is required.', 'input');
  if (typeof input === 'string') {
    messages.push({ role: 'user', content: input });
    return messages;
  }
  if (!Array.isArray(input) || input.length === 0)
    throw new InvalidRequestError(
      `\`input\` must be a string or a non-empty array of items, got ${describe(input)}.`,
      'input',
    );
  if (input.length > MAX_INPUT_ITEMS)
    throw new InvalidRequestError(
      `\`input\` holds ${input.length} items; at most ${MAX_INPUT_ITEMS} are taken in one request.`,
      'input',
    );
  const turns: Turn[] = messages;
  input.forEach((item: unknown, i) => readItem(item, `input[${i}]`, turns));
  return turns.map(({ calls, ...turn }) => (calls === undefined ? turn : { ...turn, toolCalls: calls }));
}

function readItem(item: unknown, at: string, out: Turn[]): void {
  if (!isObject(item)) throw new InvalidRequestError(`\`${at}\` must be an object, got ${describe(item)}.`, at);
  const type = field(item, 'type') ?? 'message';
  switch (type) {
    case 'message': {
      const role = field(item, 'role');
      if (role !== 'user' && role !== 'assistant' && role !== 'system' && role !== 'developer') {
        throw new InvalidRequestError(
          `\`${at}.role\` must be "user", "assistant", "system" or "developer", got ${describe(role)}.`,
          `${at}.role`,
        );
      }
      out.push({
        role: role === 'developer' ? 'system' : role,
        content: readContent(field(item, 'content'), `${at}.content`),
      });
      return;
    }
    case 'function_call': {
      const [callId, name, args] = [field(item, 'call_id'), field(item, 'name'), field(item, 'arguments')];
      if (typeof callId !== 'string' || typeof name !== 'string' || typeof args !== 'string') {
        throw new InvalidRequestError(`\`${at}\` must have string \`call_id\`, \`name\` and \`arguments\`.`, at);
      }
      const call = { id: callId, name, arguments: args };
      const last = out.at(-1);
      // Appended in place: one item is O(1) work however many calls came before it.
      if (last?.role === 'assistant') (last.calls ??= []).push(call);
      else out.push({ role: 'assistant', content: '', calls: [call] });
      return;
    }
    case 'function_call_output': {
      const [callId, output] = [field(item, 'call_id'), field(item, 'output')];
      if (typeof callId !== 'string')
        throw new InvalidRequestError(`\`${at}.call_id\` must be a string.`, `${at}.call_id`);
      out.push({
        role: 'tool',
        content: typeof output === 'string' ? output : JSON.stringify(output ?? null),
        toolCallId: callId,
      });
      return;
    }
    default:
      throw new InvalidRequestError(
        `\`${at}.type\` = ${describe(type)} is not supported; Tessera takes "message", "function_call" and "function_call_output" items.`,
        `${at}.type`,
      );
  }
}

function readContent(value: unknown, at: string): string {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value))
    throw new InvalidRequestError(`\`${at}\` must be a string or an array of parts, got ${describe(value)}.`, at);
  return value
    .map((part: unknown, j) => {
      const here = `${at}[${j}]`;
      const type = isObject(part) ? field(part, 'type') : undefined;
      const text = isObject(part) ? field(part, 'text') : undefined;
      if ((type !== 'input_text' && type !== 'output_text' && type !== 'text') || typeof text !== 'string') {
        throw new InvalidRequestError(
          `\`${here}\` must be an input_text or output_text part; Tessera takes text only.`,
          here,
        );
      }
      return text;
    })
    .join('\n');
}

/** `text.format` -> the output's constraint (undefined: free text). */
export function readTextFormat(body: JsonObject): ConstraintSpec | undefined {
  const text = field(body, 'text');
  if (text === undefined) return undefined;
  if (!isObject(text)) throw new InvalidRequestError(`\`text\` must be an object, got ${describe(text)}.`, 'text');
  const format = field(text, 'format');
  if (format === undefined) return undefined;
  if (!isObject(format))
    throw new InvalidRequestError(`\`text.format\` must be an object, got ${describe(format)}.`, 'text.format');
  switch (field(format, 'type')) {
    case 'text':
      return undefined;
    case 'json_object':
      return { kind: 'json_object' };
    case 'json_schema':
      return { kind: 'json_schema', schema: schemaText(field(format, 'schema'), 'text.format.schema') };
    default:
      throw new InvalidRequestError(
        `\`text.format.type\` must be "text", "json_object" or "json_schema", got ${describe(field(format, 'type'))}.`,
        'text.format.type',
      );
  }
}
