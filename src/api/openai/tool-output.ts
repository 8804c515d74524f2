// A chat answer's text -> OpenAI's assistant message: `content`, `refusal: null`, and the
// `tool_calls` found in it, whole (JSON bodies) or as streamed deltas. How calls are found
// depends on the request's ToolPlan (tools.ts):
//   named     the text is the arguments object: one call of that function
//   required  the text is [{"name", "parameters"}, ...]: one call per item
//   auto      Hermes/Qwen <tool_call>{"name", "arguments"}</tool_call> blocks, or a whole answer
//             that is Llama 3.1's {"name", "parameters"} JSON naming a known function
// A request whose answer holds calls finishes with "tool_calls" (a "length" end stays "length";
// a `required` answer cut before its calls parse has no content and no calls).
// Must never report a call of a function the request did not offer.
import { randomBytes } from 'node:crypto';
import type { FinishReason } from '../../core/index.js';
import type { ToolPlan } from './tools.js';

export interface ParsedCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

export interface ChatAnswer {
  readonly content: string | null;
  readonly calls: readonly ParsedCall[];
  readonly finishReason: FinishReason | 'tool_calls';
}

const callId = (): string => `call_${randomBytes(12).toString('hex')}`;

export function callJson(call: ParsedCall): object {
  return { id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } };
}

/** The whole answer of one choice. */
export function parseAnswer(plan: ToolPlan | undefined, text: string, finishReason: FinishReason): ChatAnswer {
  const calls = findCalls(plan, text);
  // A `required` answer cut by the length limit is half of Tessera's internal call list, never
  // the model's text: reported as OpenAI reports a cut-off (finish "length"), with no content.
  if (calls === null && plan?.choice.kind === 'required') return { content: null, calls: [], finishReason };
  if (calls === null) return { content: text, calls: [], finishReason };
  return {
    content: calls.rest === '' ? null : calls.rest,
    calls: calls.calls,
    finishReason: finishReason === 'length' ? 'length' : 'tool_calls',
  };
}

function findCalls(plan: ToolPlan | undefined, text: string): { calls: ParsedCall[]; rest: string } | null {
  if (plan === undefined || plan.choice.kind === 'none') return null;
  const known = new Set(plan.tools.map((t) => t.name));
  switch (plan.choice.kind) {
    case 'named':
      return { calls: [{ id: callId(), name: plan.choice.name, arguments: text }], rest: '' };
    case 'required': {
      const items = parseJson(text);
      if (!Array.isArray(items)) return null;
      const calls = items.flatMap((item: unknown) => callOf(item, 'parameters', known));
      return calls.length === 0 ? null : { calls, rest: '' };
    }
    case 'auto': {
      const blocks = [...text.matchAll(/<tool_call>([\s\S]*?)<\/tool_call>/g)];
      const calls = blocks.flatMap((m) => callOf(parseJson(m[1] ?? ''), 'arguments', known));
      if (calls.length > 0) return { calls, rest: text.replace(/<tool_call>[\s\S]*?<\/tool_call>/g, '').trim() };
      const whole = callOf(parseJson(text.trim()), 'parameters', known);
      return whole.length > 0 ? { calls: whole, rest: '' } : null;
    }
  }
}

function callOf(value: unknown, argsKey: 'arguments' | 'parameters', known: ReadonlySet<string>): ParsedCall[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  const record = value as Record<string, unknown>;
  const name = record['name'];
  const args = record[argsKey] ?? record['arguments'] ?? record['parameters'];
  if (typeof name !== 'string' || !known.has(name) || typeof args !== 'object' || args === null) return [];
  return [{ id: callId(), name, arguments: JSON.stringify(args) }];
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * One streamed choice: text in, chat deltas out. Named calls stream their arguments as they
 * come; `required` and auto answers that look like calls are held until the end (a call is only
 * known to be one once it parses); plain auto text streams as content.
 */
export class StreamingAnswer {
  readonly #plan: ToolPlan | undefined;
  #text = '';
  #held = true;
  #namedId: string | undefined;

  constructor(plan: ToolPlan | undefined) {
    this.#plan = plan;
  }

  push(text: string): object[] {
    if (text === '') return [];
    this.#text += text;
    const plan = this.#plan;
    if (plan?.choice.kind === 'named') {
      const first = this.#namedId === undefined;
      this.#namedId ??= callId();
      const fn = first ? { name: plan.choice.name, arguments: text } : { arguments: text };
      return [{ tool_calls: [{ index: 0, ...(first ? { id: this.#namedId, type: 'function' } : {}), function: fn }] }];
    }
    if (plan === undefined || plan.choice.kind === 'none') return [{ content: text }];
    if (plan.choice.kind === 'auto' && this.#held && !mayBeCall(this.#text)) {
      this.#held = false;
      return [{ content: this.#text }];
    }
    if (!this.#held) return [{ content: text }];
    return [];
  }

  /** What is left to send at the end, and the choice's finish reason. */
  end(finishReason: FinishReason): { readonly deltas: object[]; readonly finishReason: FinishReason | 'tool_calls' } {
    const plan = this.#plan;
    if (plan?.choice.kind === 'named')
      return { deltas: [], finishReason: finishReason === 'length' ? 'length' : 'tool_calls' };
    if (plan === undefined || plan.choice.kind === 'none' || !this.#held) return { deltas: [], finishReason };
    const answer = parseAnswer(plan, this.#text, finishReason);
    const deltas: object[] = [];
    if (answer.content !== null && answer.content !== '') deltas.push({ content: answer.content });
    answer.calls.forEach((call, index) =>
      deltas.push({
        tool_calls: [
          { index, id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } },
        ],
      }),
    );
    return { deltas, finishReason: answer.finishReason };
  }
}

/** Whether auto text so far may still become a tool call (so it is held back). */
function mayBeCall(text: string): boolean {
  const t = text.trimStart();
  const tag = '<tool_call>';
  return t === '' || t.startsWith(tag) || tag.startsWith(t) || t.startsWith('{');
}
